// `lite-llama pull ORG/NAME`: downloads a Hugging Face model repository into models/NAME.
#include <cstdio>
#include <cstdlib>

#include "common.h"
#include "hub_download.h"

namespace lite_llama::cli {
namespace {

struct PullArgs {
  HubOptions hub;
  bool quiet = false;
};

void run_pull(PullArgs& a) {
  HubOptions o = a.hub;
  if (const char* e = std::getenv("HF_ENDPOINT"); e && *e) o.endpoint = e;
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) o.token = t;
  if (o.dir.empty()) o.dir = "models/" + o.repo.substr(o.repo.find('/') + 1);
  o.progress = !a.quiet;
  const HubResult r = hub_pull(o);
  std::printf("%s: %zu files downloaded (%.1f MB), %zu already present, in %s\n", o.repo.c_str(),
              r.downloaded.size(), double(r.bytes) / 1e6, r.present.size(), o.dir.c_str());
  if (!a.quiet) std::printf("run it with: lite-llama generate -m %s \"...\"\n", o.dir.c_str());
}

}  // namespace

void register_pull(CLI::App& app) {
  auto a = std::make_shared<PullArgs>();
  CLI::App* c = app.add_subcommand(
      "pull", "download a model from the Hugging Face Hub (HF_TOKEN, HF_ENDPOINT are honoured)");
  c->add_option("repo", a->hub.repo, "ORG/NAME, e.g. HuggingFaceTB/SmolLM2-135M-Instruct")
      ->required();
  c->add_option("--revision", a->hub.revision, "branch, tag or commit")->capture_default_str();
  c->add_option("--dir", a->hub.dir, "destination directory (default: models/NAME)");
  c->add_flag("-q,--quiet", a->quiet, "no progress output");
  c->callback([a] { run_pull(*a); });
}

}  // namespace lite_llama::cli
