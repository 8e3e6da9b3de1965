// embed-image: the helper that embeds query images for query and serve (image_tool.h).
#include <iostream>
#include <string>
#include <vector>

#include "stages/embed/image_tool.h"

int main(int argc, char** argv) {
  return tessera::embed::image_tool_main(std::vector<std::string>(argv + 1, argv + argc),
                                         std::cerr);
}
