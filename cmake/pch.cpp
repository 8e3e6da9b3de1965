// The translation unit that compiles the precompiled headers of cmake/TesseraPch.cmake.
