// lite-llama: generate, chat, tokenize, info, score, bench, pull (and serve where built).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "common.h"
#include "core/error.h"

int main(int argc, char** argv) {
  using namespace lite_llama;
  CLI::App app{"lite-llama: a light, fast inference engine for Llama-family models"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  cli::register_generate(app);
  cli::register_chat(app);
  cli::register_tokenize(app);
  cli::register_info(app);
  cli::register_score(app);
  cli::register_bench(app);
  cli::register_pull(app);
#ifdef LL_HAVE_SERVER
  cli::register_serve(app);
#endif
  // CLI11 converts an empty value to 0 ("--temperature ''" would decode greedily, "--top-k ''"
  // turn top-k off): a number option needs a number.
  const CLI::Validator number_given(
      [](std::string& v) { return v.empty() ? std::string("empty value (a number is expected)") : std::string(); },
      "");
  for (CLI::App* c : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* o : c->get_options())
      if (const std::string t = o->get_type_name(); t.starts_with("INT") || t.starts_with("UINT") ||
                                                    t.starts_with("FLOAT"))
        o->check(number_given);
  // CLI11 reports an unknown command only as "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + c->get_name();
      known = known || c->check_name(argv[1]);
    }
    if (!known) {
      std::fprintf(stderr, "error: unknown command '%s' (commands: %s; see --help)\n", argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  } catch (const cli::ExitStatus& e) {
    std::fflush(stdout);
    return e.code;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  // Output that never arrived (a full disk, a closed stdout) is a failure, not a success.
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    std::fprintf(stderr, "error: writing the output failed: %s\n", std::strerror(errno ? errno : EIO));
    return 2;
  }
  return 0;
}
