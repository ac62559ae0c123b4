#include "hub_download.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "core/error.h"

namespace fs = std::filesystem;

namespace lite_llama::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMB = 1e6;

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;
using HeaderList = std::unique_ptr<curl_slist, ListDeleter>;

std::string escape(const std::string& s) {
  char* e = curl_easy_escape(nullptr, s.c_str(), int(s.size()));
  std::string r = e ? e : s;
  curl_free(e);
  return r;
}

bool valid_repo(const std::string& r) {
  const size_t slash = r.find('/');
  if (slash == 0 || slash == std::string::npos || slash + 1 == r.size() ||
      r.find('/', slash + 1) != std::string::npos)
    return false;
  for (char c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/'))
      return false;
  return r.find("..") == std::string::npos;
}

// One line for an HTTP failure. The Hub answers 401 for a repository that does not exist as
// well as for one the caller may not read, and explains itself in X-Error-Message.
std::string http_error(long code, const std::string& what, const std::string& url, bool token,
                       bool is_file, const std::string& server_msg) {
  std::string why;
  switch (code) {
    case 401:
      why = token ? "the repository does not exist, or the token in HF_TOKEN cannot read it"
                  : "the repository does not exist, or is private or gated: set HF_TOKEN to a "
                    "token that can read it";
      break;
    case 403:
      why = "gated repository? accept its terms on the Hub with the account of HF_TOKEN";
      break;
    case 404:
      why =
          is_file ? "the file listed by the Hub API is not there" : "check ORG/NAME and --revision";
      break;
    default:
      why = "unexpected answer";
  }
  const std::string msg = server_msg.empty() ? "" : fmt::format(" (server: {})", server_msg);
  return fmt::format("{}: HTTP {} from {}: {}{}", what, code, url, why, msg);
}

// Common options: redirects (the Hub sends large files to a CDN), timeouts that catch a stalled
// transfer, HTTP(S) only. libcurl drops our Authorization header when a redirect leaves the
// host, so the token never reaches the CDN.
HeaderList prepare(CURL* h, const std::string& url, const HubOptions& o, char* errbuf,
                   const std::string& range = "") {
  curl_slist* l = nullptr;
  if (!o.token.empty()) l = curl_slist_append(l, ("Authorization: Bearer " + o.token).c_str());
  if (!range.empty()) l = curl_slist_append(l, ("Range: " + range).c_str());
  HeaderList headers(l);
  errbuf[0] = '\0';
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_USERAGENT, "lite-llama/0.1");
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  return headers;
}

std::string network_error(CURLcode rc, const char* errbuf, const std::string& what) {
  return fmt::format("{}: network error: {}", what, errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

// Headers of the final response (a redirect starts a new set).
struct ReplyHeaders {
  std::string content_range, error_message;
};

size_t on_header(char* p, size_t s, size_t n, void* u) {
  auto& h = *static_cast<ReplyHeaders*>(u);
  std::string line(p, s * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  auto value = [&](const char* key) -> const char* {
    const size_t k = std::strlen(key);
    if (line.size() <= k || strncasecmp(line.c_str(), key, k) != 0) return nullptr;
    return line.c_str() + k + (line[k] == ' ' ? 1 : 0);
  };
  if (line.rfind("HTTP/", 0) == 0) h = ReplyHeaders{};
  if (const char* v = value("content-range:")) h.content_range = v;
  // One line: the message goes into ours.
  if (const char* v = value("x-error-message:")) h.error_message = std::string(v).substr(0, 300);
  return s * n;
}

size_t to_string(char* p, size_t s, size_t n, void* u) {
  auto* out = static_cast<std::string*>(u);
  if (out->size() > (64u << 20)) return 0;  // a file listing is never this large
  out->append(p, s * n);
  return s * n;
}

struct Sibling {
  std::string name;
  int64_t size = -1;  // -1: the listing did not say
};

std::vector<Sibling> list_files(CURL* h, const HubOptions& o) {
  // blobs=true adds each file's size (as huggingface_hub's model_info(files_metadata=True)).
  const std::string url = fmt::format("{}/api/models/{}/revision/{}?blobs=true", o.endpoint, o.repo,
                                      escape(o.revision));
  const std::string what = fmt::format("{}@{}", o.repo, o.revision);
  char errbuf[CURL_ERROR_SIZE];
  std::string body;
  ReplyHeaders reply;
  curl_easy_reset(h);
  HeaderList headers = prepare(h, url, o, errbuf);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_string);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) fail("{}", network_error(rc, errbuf, what));
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200)
    fail("{}", http_error(code, what, url, !o.token.empty(), false, reply.error_message));
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("siblings") || !j["siblings"].is_array())
    fail("{}: the Hub API answer has no 'siblings' list ({})", what, url);
  std::vector<Sibling> files;
  for (const auto& s : j["siblings"]) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    Sibling f{s["rfilename"].get<std::string>()};
    if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<int64_t>();
    files.push_back(f);
  }
  return files;
}

struct Transfer {
  CURL* h = nullptr;
  fs::path part;
  int64_t offset = 0;  // bytes already in `part` that the request asked the server to skip
  std::FILE* f = nullptr;
  bool started = false, bad_range = false;
  long code = 0;
  ReplyHeaders reply;
  // Progress.
  bool tty = false, show = true;
  std::string label;
  int64_t total = -1;
  Clock::time_point t0 = Clock::now(), last{};
};

// Opens the .part on the first body bytes of the final response: appended on 206 (from where
// the Range asked), rewritten on 200 (the server ignored the Range); other codes are errors and
// their bodies are dropped.
size_t on_body(char* p, size_t s, size_t n, void* u) {
  auto& t = *static_cast<Transfer*>(u);
  if (!t.started) {
    t.started = true;
    curl_easy_getinfo(t.h, CURLINFO_RESPONSE_CODE, &t.code);
    if (t.code == 206) {
      long long start = -1;
      if (std::sscanf(t.reply.content_range.c_str(), "bytes %lld-", &start) != 1 ||
          start != t.offset) {
        t.bad_range = true;
        return 0;
      }
      t.f = std::fopen(t.part.c_str(), "ab");
    } else if (t.code == 200) {
      t.offset = 0;
      t.f = std::fopen(t.part.c_str(), "wb");
    }
    if ((t.code == 200 || t.code == 206) && !t.f) return 0;
  }
  if (!t.f) return s * n;
  return std::fwrite(p, 1, s * n, t.f) == s * n ? s * n : 0;
}

std::string progress_line(const Transfer& t, int64_t have, double secs) {
  const double rate = secs > 0 ? double(have - t.offset) / kMB / secs : 0;
  if (t.total <= 0)
    return fmt::format("{:<40} {:8.1f} MB  {:6.1f} MB/s", t.label, double(have) / kMB, rate);
  const double frac = std::min(1.0, double(have) / double(t.total));
  const int fill = int(frac * 24);
  return fmt::format("{:<40} [{}{}] {:6.1f}/{:.1f} MB  {:6.1f} MB/s", t.label,
                     std::string(size_t(fill), '#'), std::string(size_t(24 - fill), '-'),
                     double(have) / kMB, double(t.total) / kMB, rate);
}

int on_progress(void* u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
  auto& t = *static_cast<Transfer*>(u);
  if (t.total < 0 && dltotal > 0) t.total = t.offset + int64_t(dltotal);
  if (!t.show || !t.tty) return 0;
  const auto now = Clock::now();
  if (now - t.last < std::chrono::milliseconds(200)) return 0;
  t.last = now;
  const double secs = std::chrono::duration<double>(now - t.t0).count();
  std::fprintf(stderr, "\r%s", progress_line(t, t.offset + int64_t(dlnow), secs).c_str());
  return 0;
}

// One file into `dir`, through `<name>.part`. Returns the bytes transferred.
int64_t download(CURL* h, const HubOptions& o, const Sibling& file, const std::string& label) {
  const fs::path final_path = fs::path(o.dir) / file.name;
  const std::string url =
      fmt::format("{}/{}/resolve/{}/{}", o.endpoint, o.repo, escape(o.revision), escape(file.name));
  for (int attempt = 0;; ++attempt) {
    Transfer t;
    t.h = h;
    t.part = final_path.string() + ".part";
    std::error_code ec;
    t.offset = fs::exists(t.part) ? int64_t(fs::file_size(t.part, ec)) : 0;
    if (ec) t.offset = 0;
    t.total = file.size;
    t.tty = isatty(fileno(stderr));
    t.show = o.progress;
    t.label = label;
    char errbuf[CURL_ERROR_SIZE];
    curl_easy_reset(h);
    HeaderList headers =
        prepare(h, url, o, errbuf, t.offset > 0 ? fmt::format("bytes={}-", t.offset) : "");
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t.reply);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
    const CURLcode rc = curl_easy_perform(h);
    if (t.f) std::fclose(t.f);
    if (t.tty && t.show) std::fprintf(stderr, "\r\033[K");
    const std::string what = fmt::format("{}@{}: {}", o.repo, o.revision, file.name);
    if (!t.started) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t.code);
    // A .part that is already whole (or longer than the file): 416, or a 206 from elsewhere.
    if (attempt == 0 && t.offset > 0 && (t.code == 416 || t.bad_range)) {
      fs::remove(t.part, ec);
      continue;
    }
    if (t.bad_range) fail("{}: the server answered the Range request with another range", what);
    if (rc != CURLE_OK && (t.code == 200 || t.code == 206 || t.code == 0)) {
      const bool kept = fs::exists(t.part, ec) && fs::file_size(t.part, ec) > 0;
      fail("{}{}", network_error(rc, errbuf, what),
           kept ? fmt::format(" (the partial file {} is kept: run pull again to resume)",
                              t.part.string())
                : "");
    }
    if (t.code != 200 && t.code != 206)
      fail("{}", http_error(t.code, what, url, !o.token.empty(), true, t.reply.error_message));
    if (!t.started) {  // an empty body: an empty file
      std::FILE* f = std::fopen(t.part.c_str(), "wb");
      LL_CHECK(f != nullptr, "cannot write '{}'", t.part.string());
      std::fclose(f);
    }
    const int64_t have = int64_t(fs::file_size(t.part));
    if (file.size >= 0 && have != file.size)
      fail("{}: got {} bytes but the Hub lists {} (the partial file {} is kept)", what, have,
           file.size, t.part.string());
    fs::rename(t.part, final_path);
    if (o.progress) {
      const double secs = std::chrono::duration<double>(Clock::now() - t.t0).count();
      t.total = have;
      std::fprintf(stderr, "%s%s\n", progress_line(t, have, secs).c_str(),
                   t.offset > 0
                       ? fmt::format("  (resumed at {:.1f} MB)", double(t.offset) / kMB).c_str()
                       : "");
    }
    return have - t.offset;
  }
}

}  // namespace

bool hub_wanted_file(const std::string& n) {
  if (n.find('/') != std::string::npos) return false;  // sub-folders: other formats, originals
  auto ends = [&](const std::string& s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return n == "config.json" || n == "generation_config.json" || n == "chat_template.jinja" ||
         n == "model.safetensors.index.json" || ends(".safetensors") ||
         (n.rfind("tokenizer", 0) == 0 && ends(".json"));
}

HubResult hub_pull(const HubOptions& o_in) {
  HubOptions o = o_in;
  LL_CHECK(valid_repo(o.repo), "'{}' is not a Hub repository name (ORG/NAME)", o.repo);
  LL_CHECK(!o.revision.empty(), "--revision must not be empty");
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  LL_CHECK(o.endpoint.rfind("https://", 0) == 0 || o.endpoint.rfind("http://", 0) == 0,
           "HF_ENDPOINT '{}' must start with https:// or http://", o.endpoint);
  static CurlGlobal global;
  Easy h(curl_easy_init());
  LL_CHECK(h != nullptr, "cannot initialise libcurl");

  std::vector<Sibling> all = list_files(h.get(), o), files;
  bool config = false, weights = false;
  for (const Sibling& s : all) {
    if (!hub_wanted_file(s.name)) continue;
    files.push_back(s);
    config |= s.name == "config.json";
    weights |= s.name.size() > 12 && s.name.compare(s.name.size() - 12, 12, ".safetensors") == 0;
  }
  LL_CHECK(config, "{}@{}: no config.json at the top of the repository (not a transformers model?)",
           o.repo, o.revision);
  LL_CHECK(weights,
           "{}@{}: no *.safetensors weights (.bin/.pth checkpoints are not read; for a "
           "GGUF repository download the .gguf file itself)",
           o.repo, o.revision);

  std::error_code ec;
  fs::create_directories(o.dir, ec);
  LL_CHECK(!ec, "cannot create '{}': {}", o.dir, ec.message());
  HubResult r;
  for (size_t i = 0; i < files.size(); ++i) {
    const Sibling& f = files[i];
    const fs::path p = fs::path(o.dir) / f.name;
    // Complete files are renamed from their .part only at the end, so an existing file is whole
    // unless the listing's size says otherwise.
    if (fs::exists(p) && (f.size < 0 || int64_t(fs::file_size(p, ec)) == f.size)) {
      r.present.push_back(f.name);
      continue;
    }
    const std::string label = fmt::format("[{}/{}] {}", i + 1, files.size(), f.name);
    r.bytes += download(h.get(), o, f, label);
    r.downloaded.push_back(f.name);
  }
  return r;
}

}  // namespace lite_llama::cli
