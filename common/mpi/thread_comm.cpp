#include "common/mpi/thread_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/core/log.h"

namespace tessera {

// Every collective is an allgather of one generation: each rank deposits its bytes, the last to
// arrive publishes the gathered vector and opens the next generation. A rank reads the result of
// its generation before it can enter the next, and the next cannot complete before every rank has
// entered it, so one published result suffices.
class Rendezvous {
 public:
  explicit Rendezvous(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }

  std::vector<std::string> exchange(int rank, const std::string& operation,
                                    const std::string& bytes) {
    std::unique_lock<std::mutex> lock(mutex_);
    throw_if_poisoned();
    if (departed_ >= 0) {
      poison_locked(rank, fmt::format("rank {} entered {} after rank {} returned", rank,
                                      operation, departed_),
                    kExitError);
      throw_if_poisoned();
    }
    if (arrived_ == 0) {
      operation_ = operation;
    } else if (operation != operation_) {
      poison_locked(rank, fmt::format("rank {} entered {} while other ranks are in {}", rank,
                                      operation, operation_),
                    kExitError);
      throw_if_poisoned();
    }
    slots_[rank] = bytes;
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      result_ = std::move(slots_);
      slots_.assign(size_, std::string());
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return result_;
    }
    changed_.wait(lock, [&] { return generation_ != generation || poisoned_ || departed_ >= 0; });
    if (generation_ != generation) return result_;
    if (!poisoned_) {
      poison_locked(rank, fmt::format("rank {} returned while rank {} waits in {}", departed_,
                                      rank, operation),
                    kExitError);
    }
    throw_if_poisoned();
    return {};  // not reached
  }

  // The first call poisons the job with `message` and returns true; later ones return false.
  bool poison(int rank, const std::string& message, int exit_code) {
    std::lock_guard<std::mutex> lock(mutex_);
    return poison_locked(rank, message, exit_code);
  }

  void depart(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (departed_ < 0) departed_ = rank;
    changed_.notify_all();
  }

  int waiting() {
    std::lock_guard<std::mutex> lock(mutex_);
    return arrived_;
  }

  // The rank whose call poisoned the job, -1 while it is not poisoned.
  int poisoned_by() {
    std::lock_guard<std::mutex> lock(mutex_);
    return poisoned_ ? poisoned_by_ : -1;
  }

 private:
  bool poison_locked(int rank, const std::string& message, int exit_code) {
    if (poisoned_) return false;
    poisoned_ = true;
    poisoned_by_ = rank;
    message_ = message;
    exit_code_ = exit_code;
    changed_.notify_all();
    return true;
  }

  void throw_if_poisoned() const {
    if (poisoned_) throw CommAborted(message_, exit_code_);
  }

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> slots_;   // this generation's deposits, by rank
  std::vector<std::string> result_;  // the last completed generation's
  std::string operation_;            // what this generation's first rank entered
  int arrived_ = 0;
  uint64_t generation_ = 0;
  int departed_ = -1;  // the first rank that returned, -1 while none has
  bool poisoned_ = false;
  int poisoned_by_ = -1;
  std::string message_;
  int exit_code_ = kExitError;
};

namespace {

template <typename T>
std::string to_bytes(T value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
std::vector<T> from_bytes(const std::vector<std::string>& all) {
  std::vector<T> values(all.size());
  for (size_t i = 0; i < all.size(); ++i) std::memcpy(&values[i], all[i].data(), sizeof(T));
  return values;
}

template <typename T>
T sum_of(const std::vector<T>& values) {
  T total = 0;
  for (T v : values) total += v;
  return total;
}

}  // namespace

std::vector<std::unique_ptr<ThreadComm>> ThreadComm::group(int size) {
  if (size < 1) tessera::fail<InvalidInput>("an in-process job needs at least one rank, not {}", size);
  auto rendezvous = std::make_shared<Rendezvous>(size);
  std::vector<std::unique_ptr<ThreadComm>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<ThreadComm>(rendezvous, r));
  return comms;
}

ThreadComm::ThreadComm(std::shared_ptr<Rendezvous> rendezvous, int rank)
    : rendezvous_(std::move(rendezvous)), rank_(rank) {}

ThreadComm::~ThreadComm() = default;

int ThreadComm::size() const { return rendezvous_->size(); }

std::vector<std::string> ThreadComm::exchange(const std::string& operation,
                                              const std::string& bytes) {
  return rendezvous_->exchange(rank_, operation, bytes);
}

void ThreadComm::barrier() { exchange("barrier", ""); }

std::vector<std::string> ThreadComm::allgather(const std::string& bytes) {
  return exchange("allgather", bytes);
}

std::string ThreadComm::broadcast(const std::string& bytes, int root) {
  if (root < 0 || root >= size()) {
    const std::string message =
        fmt::format("rank {} called broadcast from root {} of {} ranks", rank_, root, size());
    rendezvous_->poison(rank_, message, kExitError);
    throw CommAborted(message, kExitError);
  }
  auto all = exchange(fmt::format("broadcast from root {}", root), rank_ == root ? bytes : "");
  return std::move(all[root]);
}

int64_t ThreadComm::allreduce_sum(int64_t value) {
  return sum_of(from_bytes<int64_t>(exchange("allreduce_sum(int64)", to_bytes(value))));
}

double ThreadComm::allreduce_sum(double value) {
  return sum_of(from_bytes<double>(exchange("allreduce_sum(double)", to_bytes(value))));
}

int64_t ThreadComm::allreduce_max(int64_t value) {
  const auto all = from_bytes<int64_t>(exchange("allreduce_max(int64)", to_bytes(value)));
  return *std::max_element(all.begin(), all.end());
}

double ThreadComm::allreduce_max(double value) {
  const auto all = from_bytes<double>(exchange("allreduce_max(double)", to_bytes(value)));
  return *std::max_element(all.begin(), all.end());
}

void ThreadComm::allreduce_sum(std::vector<int64_t>& values) {
  // The length is part of the operation, so ranks passing different lengths poison the job.
  const std::string bytes(reinterpret_cast<const char*>(values.data()),
                          values.size() * sizeof(int64_t));
  const auto all = exchange(fmt::format("allreduce_sum(int64[{}])", values.size()), bytes);
  std::fill(values.begin(), values.end(), 0);
  for (const auto& b : all) {
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t v = 0;
      std::memcpy(&v, b.data() + i * sizeof v, sizeof v);
      values[i] += v;
    }
  }
}

void ThreadComm::abort(int exit_code) {
  const std::string message = fmt::format("rank {} called abort({})", rank_, exit_code);
  rendezvous_->poison(rank_, message, exit_code);
  throw CommAborted(message, exit_code);
}

bool ThreadComm::fail(const std::string& reason, int exit_code) {
  return rendezvous_->poison(rank_, fmt::format("rank {} failed: {}", rank_, reason), exit_code);
}

int ThreadComm::poisoned_by() const { return rendezvous_->poisoned_by(); }

int ThreadComm::waiting() const { return rendezvous_->waiting(); }

void ThreadComm::depart() { rendezvous_->depart(rank_); }

std::vector<RankOutcome> run_rank_outcomes(int size, const std::function<int(Comm&)>& fn,
                                           int* first_failure) {
  std::vector<std::unique_ptr<ThreadComm>> comms = ThreadComm::group(size);
  std::vector<RankOutcome> outcomes(size);
  auto body = [&](int r) {
    ThreadComm& comm = *comms[r];
    ScopedLogRank tag(r, size);
    RankOutcome& out = outcomes[r];
    try {
      out.exit_code = fn(comm);
      comm.depart();
      return;
    } catch (const Error& e) {
      out.error = std::current_exception();
      out.exit_code = e.exit_code();
    } catch (const std::exception& e) {
      out.error = std::current_exception();
      out.exit_code = kExitError;
    } catch (...) {
      out.error = std::current_exception();
      out.exit_code = kExitError;
    }
    std::string what = "an exception that is not a std::exception";
    try {
      std::rethrow_exception(out.error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    comm.fail(what, out.exit_code);
  };
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int r = 0; r < size; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
  if (first_failure != nullptr) {
    // The rank that poisoned the job threw (abort, a mismatch it found, or its own exception);
    // a job poisoned through fail() alone falls back to the lowest rank that threw.
    int first = comms.front()->poisoned_by();
    if (first >= 0 && !outcomes[first].error) first = -1;
    for (int r = 0; r < size && first < 0; ++r) {
      if (outcomes[r].error) first = r;
    }
    *first_failure = first;
  }
  return outcomes;
}

std::vector<int> run_ranks(int size, const std::function<int(Comm&)>& fn) {
  int first = -1;
  std::vector<RankOutcome> outcomes = run_rank_outcomes(size, fn, &first);
  if (first >= 0) std::rethrow_exception(outcomes[first].error);
  std::vector<int> codes;
  for (const auto& o : outcomes) codes.push_back(o.exit_code);
  return codes;
}

}  // namespace tessera
