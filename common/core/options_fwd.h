// Forward declarations of the option types, for headers that only name them (a stage's config.h,
// the stage options): Boost.Program_options' headers stay in the few files that parse options.
#pragma once

namespace boost::program_options {
class options_description;
class variables_map;
}  // namespace boost::program_options

namespace tessera {
namespace po = boost::program_options;
class OptionTable;
}  // namespace tessera
