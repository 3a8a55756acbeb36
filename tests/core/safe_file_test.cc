// open_regular, read_regular_file and AtomicFileWriter: what every path the tool reads or writes
// goes through. FIFOs must never block, non-regular files never be replaced, a full disk never
// leave a half-written file.
#include "tunableop/safe_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "core/results_test_util.h"
#include "support/file_faults.h"
#include "tunableop/checked_size.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;
using testing::write_text;

TEST(OpenRegular, RegularFilesOpenAndMissingOnesAreNotFound) {
  TempDir dir;
  write_text(dir.file("a.csv"), "x");
  auto fd = open_regular(dir.file("a.csv"), O_RDONLY);
  ASSERT_TRUE(fd.is_ok()) << fd.status().to_string();
  EXPECT_EQ(::fcntl(*fd, F_GETFL) & O_NONBLOCK, 0) << "O_NONBLOCK is cleared again";
  ::close(*fd);
  auto missing = open_regular(dir.file("none.csv"), O_RDONLY);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto created = open_regular(dir.file("new.csv"), O_WRONLY | O_CREAT | O_APPEND);
  ASSERT_TRUE(created.is_ok());
  ::close(*created);
  EXPECT_TRUE(fs::is_regular_file(dir.file("new.csv")));
}

TEST(OpenRegular, FifoNeverBlocksInAnyMode) {
  TempDir dir;
  const std::string fifo = dir.file("fifo.csv");
  ASSERT_TRUE(testing::make_fifo(fifo));
  // Each of these blocked forever before (no writer / no reader on the other end).
  for (int flags : {O_RDONLY, O_WRONLY | O_CREAT | O_APPEND, O_RDWR | O_CREAT | O_APPEND}) {
    auto fd = open_regular(fifo, flags);
    ASSERT_FALSE(fd.is_ok()) << flags;
    EXPECT_EQ(fd.status().code(), StatusCode::kIoError);
    EXPECT_NE(fd.status().message().find("is a FIFO, not a regular file"), std::string::npos) << fd.status().message();
  }
}

TEST(OpenRegular, DirectoriesAndDevicesAreNamed) {
  TempDir dir;
  auto d = open_regular(dir.path().string(), O_RDONLY);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("is a directory"), std::string::npos) << d.status().message();
  auto w = open_regular(dir.path().string(), O_WRONLY | O_CREAT | O_APPEND);
  EXPECT_NE(w.status().message().find("is a directory"), std::string::npos) << w.status().message();
  auto null = open_regular("/dev/null", O_RDONLY);
  ASSERT_FALSE(null.is_ok());
  EXPECT_NE(null.status().message().find("is a character device"), std::string::npos) << null.status().message();
}

TEST(ReadRegularFile, ReadsFilesAndRefusesTheRest) {
  TempDir dir;
  write_text(dir.file("s.csv"), "name,fp32,N,N,1,2,3\n");
  auto text = read_regular_file(dir.file("s.csv"));
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, "name,fp32,N,N,1,2,3\n");
  ASSERT_TRUE(testing::make_fifo(dir.file("fifo")));
  EXPECT_FALSE(read_regular_file(dir.file("fifo")).is_ok());
  EXPECT_FALSE(read_regular_file("/dev/zero").is_ok()) << "an endless device is never read";
}

TEST(ReadRegularFile, AFileLargerThanMemoryIsRefusedBeforeReading) {
  TempDir dir;
  const std::string path = dir.file("huge.csv");
  // Sparse: costs no disk. The "30 GB results file" case, scaled to this machine.
  { std::ofstream(path).put('V'); }
  ASSERT_EQ(::truncate(path.c_str(), off_t(host_memory_bytes() / 2)), 0);
  auto text = read_regular_file(path);
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.status().message().find("is too large to read"), std::string::npos) << text.status().message();
}

TEST(AtomicFileWriter, ReplacesARegularFileWholeAndKeepsItsMode) {
  TempDir dir;
  const std::string path = dir.file("merged.csv");
  write_text(path, "old\n");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  ASSERT_TRUE(replace_regular_file(path, "new contents\n").is_ok());
  EXPECT_EQ(read_text(path), "new contents\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "no temporary left";
  ASSERT_TRUE(replace_regular_file(dir.file("fresh.csv"), "a\n").is_ok()) << "a new path is created";
  EXPECT_EQ(read_text(dir.file("fresh.csv")), "a\n");
}

TEST(AtomicFileWriter, RefusesSymlinksFifosDirectoriesAndDevices) {
  TempDir dir;
  const std::string target = dir.file("target.csv");
  write_text(target, "precious\n");
  fs::create_symlink(target, dir.file("link.csv"));
  fs::create_symlink("/dev/null", dir.file("null-link"));
  ASSERT_TRUE(testing::make_fifo(dir.file("fifo.csv")));
  fs::create_directories(dir.file("dir.csv"));
  for (const char* name : {"link.csv", "null-link", "fifo.csv", "dir.csv"}) {
    Status st = replace_regular_file(dir.file(name), "replacement\n");
    ASSERT_FALSE(st.is_ok()) << name;
    EXPECT_NE(st.message().find("not replaced"), std::string::npos) << st.message();
  }
  EXPECT_NE(check_replaceable(dir.file("link.csv")).message().find("symbolic link (to '" + target + "')"),
            std::string::npos);
  EXPECT_EQ(read_text(target), "precious\n");
  EXPECT_TRUE(fs::is_symlink(dir.file("link.csv")));
  EXPECT_TRUE(fs::is_symlink(dir.file("null-link")));
  EXPECT_TRUE(fs::is_fifo(dir.file("fifo.csv")));
  EXPECT_FALSE(replace_regular_file("/dev/null", "x").is_ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(AtomicFileWriter, FullDiskLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const std::string path = dir.file("merged.csv");
  write_text(path, "old contents\n");
  Status st;
  {
    testing::ScopedFileSizeLimit limit(64);  // EFBIG past 64 bytes, after a short write
    st = replace_regular_file(path, std::string(1000, 'x'));
  }
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("left unchanged"), std::string::npos) << st.message();
  EXPECT_EQ(read_text(path), "old contents\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "no temporary left";
}

}  // namespace
}  // namespace tunableop
