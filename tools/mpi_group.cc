#include "mpi_group.h"

#include <fmt/format.h>
#include <sched.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#ifdef TUNABLEOP_HAVE_MPI
// The C API only (OpenMPI's and MPICH's mpi.h pull in the removed C++ bindings otherwise).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tunableop::cli {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= 0 && n < (1 << 30) ? int(n) : fallback;
}

}  // namespace

MpiLaunch mpi_launch() {
  MpiLaunch l;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (int n = env_int(v, 0); n > 0) l.size = n;
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (int r = env_int(v, -1); r >= 0) l.rank = r;
  return l;
}

bool built_with_mpi() {
#ifdef TUNABLEOP_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Status check_tp_launch(const char* command, int tp, const MpiLaunch& launch, bool with_mpi) {
  if (launch.size <= 1) return Status::ok();
  if (!with_mpi)
    return Status::unsupported(fmt::format(
        "launched as {} MPI processes, but this tunableop was built without MPI (OpenMPI's libopenmpi-dev was not "
        "found at configure time): install it (scripts/install-deps.sh) and rebuild, or run `tunableop {} --tp {}` "
        "without mpirun (one process driving every rank)",
        launch.size, command, launch.size));
  if (tp != launch.size)
    return Status::invalid_argument(fmt::format(
        "--tp {} under an MPI launch of {} processes: each process holds one tensor-parallel rank, so --tp must be "
        "{} (or run one process: `tunableop {} --tp {}` drives every rank itself)",
        tp, launch.size, launch.size, command, tp));
  return Status::ok();
}

#ifndef TUNABLEOP_HAVE_MPI

StatusOr<std::unique_ptr<MpiSession>> MpiSession::start() {
  return Status::unsupported(
      "this tunableop was built without MPI (OpenMPI's libopenmpi-dev was not found at configure time)");
}

#else

namespace {

Status mpi_error(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::unavailable(fmt::format("MPI {} failed: {}", what, std::string(text, size_t(len))));
}

// Waits for a request: busy at first (the next decode call follows within microseconds), then
// yielding, then sleeping up to a millisecond between polls (an idle server's followers). With
// more ranks than cores on this host (`crowded`: CI's 8 ranks on 2 cores) a spinning rank would
// hold the core the rank it waits for needs: it sleeps almost at once.
Status wait(MPI_Request& req, double timeout_s, const char* what, bool crowded) {
  const long spin = crowded ? 8 : 2000, yield = crowded ? 16 : 20000;
  const auto t0 = std::chrono::steady_clock::now();
  for (long polls = 0;; ++polls) {
    int done = 0;
    if (int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return mpi_error(rc, what);
    if (done) return Status::ok();
    if (polls < spin) continue;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > timeout_s)
      return Status::unavailable(fmt::format("MPI {}: the other ranks did not take part within {} s", what, timeout_s));
    if (polls < yield) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 2 * yield + 1000 ? 20 : 1000));
    }
  }
}

Status count_of(size_t bytes, int* count) {
  if (bytes > size_t(INT_MAX))
    return Status::invalid_argument(fmt::format("an MPI message of {} bytes (2 GiB at most)", bytes));
  *count = int(bytes);
  return Status::ok();
}

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(MPI_Comm comm, std::string host, bool crowded) : comm_(comm), host_(std::move(host)), crowded_(crowded) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiGroup() override { MPI_Comm_free(&comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return fmt::format("MPI rank {} of {} on {}", rank_, size_, host_); }

  Status broadcast(void* data, size_t bytes, int root) override {
    int n = 0;
    TUNABLEOP_RETURN_IF_ERROR(count_of(bytes, &n));
    MPI_Request req;
    if (int rc = MPI_Ibcast(data, n, MPI_BYTE, root, comm_, &req); rc != MPI_SUCCESS) return mpi_error(rc, "broadcast");
    return wait(req, kForever, "broadcast", crowded_);
  }
  Status all_gather(const void* mine, void* all, size_t bytes, double timeout_s) override {
    int n = 0;
    TUNABLEOP_RETURN_IF_ERROR(count_of(bytes, &n));
    MPI_Request req;
    if (int rc = MPI_Iallgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_, &req); rc != MPI_SUCCESS)
      return mpi_error(rc, "all-gather");
    return wait(req, timeout_s, "all-gather", crowded_);
  }
  Status gather(const void* mine, void* all, size_t bytes, int root) override {
    int n = 0;
    TUNABLEOP_RETURN_IF_ERROR(count_of(bytes, &n));
    MPI_Request req;
    if (int rc = MPI_Igather(mine, n, MPI_BYTE, all, n, MPI_BYTE, root, comm_, &req); rc != MPI_SUCCESS)
      return mpi_error(rc, "gather");
    return wait(req, kForever, "gather", crowded_);
  }
  Status all_to_all(const void* send, void* recv, size_t bytes) override {
    int n = 0;
    TUNABLEOP_RETURN_IF_ERROR(count_of(bytes, &n));
    MPI_Request req;
    if (int rc = MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_, &req); rc != MPI_SUCCESS)
      return mpi_error(rc, "all-to-all");
    return wait(req, kForever, "all-to-all", crowded_);
  }
  void abort(const Status& why) override {
    std::fprintf(stderr, "tunableop: %s: %s; ending the MPI job\n", describe().c_str(), why.message().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }

 private:
  MPI_Comm comm_;
  std::string host_;
  bool crowded_;
  int rank_ = 0, size_ = 1;
};

class Session final : public MpiSession {
 public:
  Session() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    // The engine's calls come from the thread that drives it (serve: the runtime's), one at a time.
    if (provided < MPI_THREAD_SERIALIZED)
      std::fprintf(stderr, "tunableop: this MPI gives threads level %d (serialized calls need %d)\n", provided,
                   MPI_THREAD_SERIALIZED);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    cpu_set_t cpus;
    const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    const bool crowded = local_size_ > cores;
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    calls_ = std::make_unique<MpiGroup>(a, std::string(name, size_t(len)), crowded);
    data_ = std::make_unique<MpiGroup>(b, std::string(name, size_t(len)), crowded);
  }
  ~Session() override {
    calls_.reset();
    data_.reset();
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  ProcessGroup& calls() override { return *calls_; }
  ProcessGroup& data() override { return *data_; }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::unique_ptr<MpiGroup> calls_, data_;
};

}  // namespace

StatusOr<std::unique_ptr<MpiSession>> MpiSession::start() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::internal("MPI is already started in this process");
  return std::unique_ptr<MpiSession>(new Session());
}

#endif

}  // namespace tunableop::cli
