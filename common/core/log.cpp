#include "common/core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"

namespace tessera {

void init_logging(int rank, int size, const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    fail<InvalidInput>("invalid --log-level '{}': expected trace, debug, info, warn, error, "
                       "critical or off", level);
  }
  auto logger = spdlog::stderr_logger_mt("tessera-" + std::to_string(rank));
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [%l] [rank {}/{}] %v", rank, size));
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::warn);
}

}  // namespace tessera
