// The MPI launch as `llm` and `serve` read it (tools/mpi_group.h), in this test built without
// MPI: the launcher's environment, --tp checked against it, and what a build without MPI says
// when mpirun starts it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "mpi_group.h"

namespace tunableop::cli {
namespace {

TEST(MpiLaunch, TpIsCheckedAgainstTheProcessesOfTheLaunch) {
  EXPECT_TRUE(check_tp_launch("llm", 4, MpiLaunch{1, 0}, false).is_ok()) << "one process drives every rank";
  EXPECT_TRUE(check_tp_launch("llm", 2, MpiLaunch{2, 1}, true).is_ok());
  Status st = check_tp_launch("serve", 4, MpiLaunch{2, 0}, true);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--tp 4 under an MPI launch of 2 processes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("`tunableop serve --tp 4`"), std::string::npos) << st.message();
  st = check_tp_launch("llm", 2, MpiLaunch{2, 0}, false);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("built without MPI"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("libopenmpi-dev"), std::string::npos) << st.message();
}

TEST(MpiLaunch, ReadsTheLaunchersEnvironmentAndABuildWithoutMpiSaysSo) {
  ASSERT_EQ(::setenv("OMPI_COMM_WORLD_SIZE", "3", 1), 0);
  ASSERT_EQ(::setenv("OMPI_COMM_WORLD_RANK", "2", 1), 0);
  const MpiLaunch l = mpi_launch();
  EXPECT_EQ(l.size, 3);
  EXPECT_EQ(l.rank, 2);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(mpi_launch().size, 1);
  EXPECT_FALSE(built_with_mpi());  // this test compiles mpi_group.cc without MPI
  auto s = MpiSession::start();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("built without MPI"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace tunableop::cli
