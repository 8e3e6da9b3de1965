#include "common/core/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"

namespace tessera {

namespace {

thread_local const std::string* thread_rank_tag = nullptr;  // set by ScopedLogRank

std::string rank_tag(int rank, int size) { return fmt::format("rank {}/{}", rank, size); }

// The %* flag: this thread's rank tag if it has one, else the process's.
class RankFlag final : public spdlog::custom_flag_formatter {
 public:
  explicit RankFlag(std::string process_tag) : process_tag_(std::move(process_tag)) {}
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string& tag = thread_rank_tag != nullptr ? *thread_rank_tag : process_tag_;
    dest.append(tag.data(), tag.data() + tag.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<RankFlag>(process_tag_);
  }

 private:
  std::string process_tag_;
};

}  // namespace

void init_logging(int rank, int size, const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    fail<InvalidInput>("invalid --log-level '{}': expected trace, debug, info, warn, error, "
                       "critical or off", level);
  }
  const std::string name = "tessera-" + std::to_string(rank);
  spdlog::drop(name);  // a second call reconfigures instead of failing on the name
  auto logger = spdlog::stderr_logger_mt(name);
  spdlog::set_default_logger(logger);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<RankFlag>('*', rank_tag(rank, size))
      .set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] [%*] %v");
  spdlog::set_formatter(std::move(formatter));
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::warn);
}

ScopedLogRank::ScopedLogRank(int rank, int size)
    : tag_(rank_tag(rank, size)), previous_(thread_rank_tag) {
  thread_rank_tag = &tag_;
}

ScopedLogRank::~ScopedLogRank() { thread_rank_tag = previous_; }

}  // namespace tessera
