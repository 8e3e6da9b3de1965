#include "stages/serve/batcher.h"

#include "common/core/error.h"

namespace tessera::serve {

std::future<std::vector<search::Hit>> Batcher::submit(SearchJob job) {
  return submit(std::move(job), -1);
}

std::future<std::vector<search::Hit>> Batcher::submit(SearchJob job, int generation) {
  Pending p{std::move(job), {}, 0, std::this_thread::get_id()};
  auto future = p.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refusing_ || closed_) fail("the service is stopping");
    p.generation = generation < 0 ? generation_ : generation;
    ++waiting_[p.submitter];
    queue_.push_back(std::move(p));
  }
  arrived_.notify_one();
  return future;
}

void Batcher::set_generation(int generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  generation_ = generation;
}

int Batcher::generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return generation_;
}

std::vector<Batcher::Pending> Batcher::take(std::chrono::duration<double> wait,
                                            std::chrono::duration<double> tick, size_t max_jobs) {
  int head = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!arrived_.wait_for(lock, wait, [&] { return closed_ || !queue_.empty(); }) || closed_) {
      return {};
    }
    head = queue_.front().generation;
  }
  return take(std::chrono::duration<double>(0), tick, max_jobs, head);
}

std::vector<Batcher::Pending> Batcher::take(std::chrono::duration<double> wait,
                                            std::chrono::duration<double> tick, size_t max_jobs,
                                            int generation) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto count = [&] {
    size_t n = 0;
    for (const Pending& p : queue_) n += p.generation == generation ? 1 : 0;
    return n;
  };
  const auto ready = [&] { return closed_ || refusing_ || count() > 0; };
  if (!arrived_.wait_for(lock, wait, ready) || closed_ || count() == 0) return {};
  if (!refusing_) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(tick);
    arrived_.wait_until(lock, until,
                        [&] { return closed_ || refusing_ || count() >= max_jobs; });
    if (closed_) return {};
  }
  std::vector<Pending> batch;
  for (auto it = queue_.begin(); it != queue_.end() && batch.size() < max_jobs;) {
    if (it->generation != generation) {
      ++it;
      continue;
    }
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return batch;
}

void Batcher::answered(const Pending& p) {
  const auto it = waiting_.find(p.submitter);
  if (it != waiting_.end() && --it->second == 0) waiting_.erase(it);
}

void Batcher::answer(std::vector<Pending>& batch, std::vector<std::vector<search::Hit>> hits) {
  for (size_t i = 0; i < batch.size(); ++i) batch[i].result.set_value(std::move(hits.at(i)));
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Pending& p : batch) answered(p);
}

void Batcher::answer_with_error(std::vector<Pending>& batch, std::exception_ptr error) {
  for (Pending& p : batch) p.result.set_exception(error);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Pending& p : batch) answered(p);
}

size_t Batcher::waiting_requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_.size();
}

void Batcher::refuse() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    refusing_ = true;
  }
  arrived_.notify_all();
}

void Batcher::close() {
  std::vector<Pending> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    refusing_ = closed_ = true;
    for (auto& p : queue_) left.push_back(std::move(p));
    queue_.clear();
  }
  arrived_.notify_all();
  answer_with_error(left, std::make_exception_ptr(Error("the service is stopping")));
}

size_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

size_t Batcher::fail_older(int generation) {
  std::vector<Pending> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->generation >= generation) {
        ++it;
        continue;
      }
      gone.push_back(std::move(*it));
      it = queue_.erase(it);
    }
  }
  answer_with_error(gone, std::make_exception_ptr(Error(
                              "the index was replaced by a newer generation while this search "
                              "waited; send it again")));
  return gone.size();
}

size_t Batcher::queued(int generation) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const Pending& p : queue_) n += p.generation == generation ? 1 : 0;
  return n;
}

}  // namespace tessera::serve
