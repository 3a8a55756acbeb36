// The processes of one job that work as one tensor-parallel group, one rank each (an MPI
// communicator in the CLI; host threads standing in for processes in the tests): what the
// multi-process all-reduce and engine need from their launcher. The library never links a
// launcher itself: the CLI implements this over MPI (tools/mpi_group.h).
//
// Every call is collective: every rank makes the same calls in the same order. A call returns
// an error only when the group cannot go on (a timeout, the launcher's failure, abort()); a
// rank that fails on its own tells the others through agree() or ends the job with abort().
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tunableop/status.h"

namespace tunableop {

class ProcessGroup {
 public:
  static constexpr double kForever = std::numeric_limits<double>::infinity();

  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string describe() const = 0;  // "MPI rank 1 of 4 on host a"

  // `bytes` bytes at root's `data` into every rank's `data`.
  virtual Status broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's `bytes` bytes at `mine`, in rank order, into `all` (size() * bytes) on every
  // rank. Fails with kUnavailable after `timeout_s` seconds without every rank's part (what a
  // rank that failed on its own uses to find out whether the others failed alike).
  virtual Status all_gather(const void* mine, void* all, size_t bytes, double timeout_s = kForever) = 0;
  // Every rank's `bytes` bytes into root's `all` (size() * bytes; others may pass null).
  virtual Status gather(const void* mine, void* all, size_t bytes, int root) = 0;
  // Slice q (`bytes` bytes) of `send` to rank q; slice q of `recv` from rank q.
  virtual Status all_to_all(const void* send, void* recv, size_t bytes) = 0;
  // Ends the job, every rank of it, saying `why` (an MPI launcher ends every process; the test
  // group fails every later call): what a rank does when it cannot go on in step.
  virtual void abort(const Status& why) = 0;
};

// Every rank's Status, agreed: ok when every rank's is, else on every rank the first failing
// rank's (its message says which rank). Collective. An error of the group itself is returned
// as is.
Status agree(ProcessGroup& group, const Status& mine);

// Root's string on every rank; strings of every rank at root (others: empty).
StatusOr<std::string> broadcast_string(ProcessGroup& group, std::string s, int root);
StatusOr<std::vector<std::string>> gather_strings(ProcessGroup& group, const std::string& mine, int root);

}  // namespace tunableop
