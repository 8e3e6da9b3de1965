// A byte-bounded least-recently-used cache of immutable values (encoded tiles), shared by the HTTP
// threads. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace tessera::serve {

class LruCache {
 public:
  using Value = std::shared_ptr<const std::string>;

  explicit LruCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The value of `key`, nullptr when absent; a hit makes it the most recent.
  Value get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Stores `value` under `key` and evicts the least recent values until the cache holds at most
  // max_bytes (a value larger than that is not kept).
  void put(const std::string& key, Value value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value->size() > max_bytes_) return;
    if (const auto it = index_.find(key); it != index_.end()) {
      bytes_ -= it->second->second->size();
      order_.erase(it->second);
      index_.erase(it);
    }
    bytes_ += value->size();
    order_.emplace_front(key, std::move(value));
    index_[key] = order_.begin();
    while (bytes_ > max_bytes_) {
      bytes_ -= order_.back().second->size();
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    order_.clear();
    index_.clear();
    bytes_ = 0;
  }

  size_t bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }
  size_t entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return index_.size();
  }
  int64_t hits() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }
  int64_t misses() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return misses_;
  }

 private:
  mutable std::mutex mutex_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  std::list<std::pair<std::string, Value>> order_;  // most recent first
  std::unordered_map<std::string, std::list<std::pair<std::string, Value>>::iterator> index_;
};

}  // namespace tessera::serve
