#include "stages/serve/batcher.h"

#include "common/core/error.h"

namespace tessera::serve {

std::future<std::vector<query::Hit>> Batcher::submit(SearchJob job) {
  Pending p{std::move(job), {}};
  auto future = p.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) fail("the service is stopping");
    queue_.push_back(std::move(p));
  }
  arrived_.notify_one();
  return future;
}

std::vector<Batcher::Pending> Batcher::take(std::chrono::duration<double> wait,
                                            std::chrono::duration<double> tick, size_t max_jobs) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!arrived_.wait_for(lock, wait, [&] { return closed_ || !queue_.empty(); }) || closed_) {
    return {};
  }
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(tick);
  arrived_.wait_until(lock, until, [&] { return closed_ || queue_.size() >= max_jobs; });
  std::vector<Pending> batch;
  while (!queue_.empty() && batch.size() < max_jobs) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void Batcher::close() {
  std::deque<Pending> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    left.swap(queue_);
  }
  for (auto& p : left) p.result.set_exception(std::make_exception_ptr(Error("the service is stopping")));
  arrived_.notify_all();
}

size_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

}  // namespace tessera::serve
