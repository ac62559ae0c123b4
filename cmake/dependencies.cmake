# Third-party libraries, all from Debian packages (see scripts/install-deps).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
if(LITE_LLAMA_CLI)
  find_package(CLI11 REQUIRED)
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Unicode normalisation (NFC) for HF tokenizers; optional (the GPU image lacks the headers).
pkg_check_modules(ICU IMPORTED_TARGET icu-uc)
if(LITE_LLAMA_CLI)  # the Python module alone needs neither the server nor the Hub download
  find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
endif()
# Debian's cpp-httplib is a compiled library (with OpenSSL/zlib/brotli defines); the local Hub
# server of the `pull` test uses it. Optional: that test is skipped where it is missing.
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
# The server's event-driven HTTP layer: Boost.Asio + Beast (header-only). Optional: without it
# `lite-llama serve` is not built.
find_package(Boost 1.74 CONFIG COMPONENTS headers)
# `lite-llama pull` downloads from the Hugging Face Hub.
if(LITE_LLAMA_CLI)
  find_package(CURL REQUIRED)
endif()
