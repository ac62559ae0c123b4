// `lite-llama pull` against a local stand-in for the Hugging Face Hub (cpp-httplib in this
// process; the CLI runs as a child process with HF_ENDPOINT pointing here). The stand-in serves
// the committed qwen3 fixture (three shards + index) as repository org/tiny: the Hub API file
// listing, /resolve/ downloads with a 302 redirect to a "CDN" path for one shard, Range
// requests, and a bearer token when one is set. No internet is used.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kShard1 = "model-00001-of-00003.safetensors";  // served through a redirect
const char* const kShard2 = "model-00002-of-00003.safetensors";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HubStandIn {
 public:
  HubStandIn() {
    const fs::path fx = fs::path(LL_SOURCE_DIR) / "tests/fixtures/models/qwen3";
    for (const auto& e : fs::directory_iterator(fx))
      files_[e.path().filename()] = read_all(e.path());
    // Files pull must leave alone (its README, an ONNX export in a sub-folder).
    files_["README.md"] = "# tiny\n";
    files_["onnx/model.onnx"] = "not wanted";
    port_ = svr_.bind_to_any_port("127.0.0.1");
    svr_.Get(R"(/api/models/([^/]+/[^/]+)/revision/([^/]+))",
             [this](const auto& q, auto& r) { api(q, r); });
    svr_.Get(R"(/([^/]+/[^/]+)/resolve/([^/]+)/(.+))",
             [this](const auto& q, auto& r) { resolve(q, r); });
    svr_.Get(R"(/cdn/(.+))", [this](const auto& q, auto& r) { serve(q.matches[1], q, r); });
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HubStandIn() {
    svr_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& file(const std::string& name) const { return files_.at(name); }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> g(mu_);
    return log_;
  }

  std::string token;                   // when set, API and /resolve/ need "Bearer <token>"
  std::atomic<bool> drop_once{false};  // cut the first download of kShard2 after half its bytes

 private:
  bool authorised(const httplib::Request& q, httplib::Response& r) {
    if (token.empty() || q.get_header_value("Authorization") == "Bearer " + token) return true;
    r.status = 401;
    r.set_header("X-Error-Message", "Invalid credentials in Authorization header");
    r.set_content(R"({"error":"Invalid credentials in Authorization header"})", "application/json");
    return false;
  }
  void record(const std::string& what) {
    std::lock_guard<std::mutex> g(mu_);
    log_.push_back(what);
  }
  void api(const httplib::Request& q, httplib::Response& r) {
    record("api " + std::string(q.matches[1]) + " " + std::string(q.matches[2]));
    if (!authorised(q, r)) return;
    const std::string repo = q.matches[1];
    if (repo != "org/tiny" && repo != "org/broken") {
      r.status = 404;
      r.set_content(R"({"error":"Repository not found"})", "application/json");
      return;
    }
    json siblings = json::array();
    for (const auto& [name, bytes] : files_)
      siblings.push_back({{"rfilename", name}, {"size", bytes.size()}});
    if (repo == "org/broken")
      siblings.push_back({{"rfilename", "tokenizer.json"}});  // listed, not served
    r.set_content(json{{"id", repo}, {"sha", "0123abcd"}, {"siblings", siblings}}.dump(),
                  "application/json");
  }
  void resolve(const httplib::Request& q, httplib::Response& r) {
    const std::string name = q.matches[3];
    if (!authorised(q, r)) return;
    if (name == kShard1) {
      r.set_redirect("/cdn/" + name, 302);
      record("redirect " + name);
      return;
    }
    serve(name, q, r);
  }
  void serve(const std::string& name, const httplib::Request& q, httplib::Response& r) {
    const std::string range = q.get_header_value("Range");
    record("get " + name + (range.empty() ? "" : " " + range));
    auto it = files_.find(name);
    if (it == files_.end()) {
      r.status = 404;
      r.set_content("Entry not found", "text/plain");
      return;
    }
    const std::string& body = it->second;
    if (!range.empty() && std::stoul(range.substr(range.find('=') + 1)) >= body.size()) {
      r.status = 416;
      return;
    }
    const bool drop = name == kShard2 && drop_once.exchange(false);
    // httplib answers a Range itself (206, Content-Range) by asking the provider for that
    // slice; the provider can also cut the transfer off half-way (the connection closes).
    r.set_content_provider(body.size(), "application/octet-stream",
                           [&body, drop](size_t off, size_t len, httplib::DataSink& sink) {
                             if (drop && off >= body.size() / 2) return false;
                             size_t n = std::min<size_t>(len, 65536);
                             if (drop) n = std::min(n, body.size() / 2 - off);
                             sink.write(body.data() + off, n);
                             return true;
                           });
  }

  std::map<std::string, std::string> files_;
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> log_;
};

struct CliRun {
  int status = -1;
  std::string out, err;
};

class Pull : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("ll_pull_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // env: extra "NAME=value" words; HF_TOKEN from the developer's shell never leaks in.
  CliRun pull(const std::string& args, const std::string& env = "") {
    const std::string cmd = "cd '" + root_.string() +
                            "' && env -u HF_TOKEN HF_ENDPOINT=" + hub_.endpoint() + " " + env +
                            " '" + LL_CLI_PATH + "' pull " + args + " >'" +
                            (root_ / "out").string() + "' 2>'" + (root_ / "err").string() + "'";
    const int rc = std::system(cmd.c_str());
    CliRun r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = read_all(root_ / "out");
    r.err = read_all(root_ / "err");
    return r;
  }
  static void expect_one_line_error(const CliRun& r, const std::vector<std::string>& needles) {
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
    std::printf("  cli: %s", r.err.c_str());
  }
  std::vector<std::string> wanted() const {
    return {"config.json", "model.safetensors.index.json", kShard1, kShard2,
            "model-00003-of-00003.safetensors"};
  }
  void expect_complete(const fs::path& d) {
    std::vector<std::string> got;
    for (const auto& e : fs::directory_iterator(d)) got.push_back(e.path().filename());
    std::sort(got.begin(), got.end());
    std::vector<std::string> want = wanted();
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "wanted files only, no .part left";
    for (const std::string& f : want)
      EXPECT_TRUE(read_all(d / f) == hub_.file(f)) << f << " differs";
  }
  size_t count_log(const std::string& prefix) {
    size_t n = 0;
    for (const std::string& l : hub_.log()) n += l.rfind(prefix, 0) == 0;
    return n;
  }

  HubStandIn hub_;
  fs::path root_;
};

TEST_F(Pull, DownloadsTheWantedFilesByteForByte) {
  const fs::path d = root_ / "tiny";
  const CliRun r = pull("org/tiny --dir '" + d.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_complete(d);
  EXPECT_EQ(count_log("redirect " + std::string(kShard1)), 1u);
  EXPECT_EQ(count_log("get " + std::string(kShard1)), 1u) << "the redirect was followed";
  EXPECT_EQ(count_log("api org/tiny main"), 1u);
  EXPECT_NE(r.err.find("MB/s"), std::string::npos) << "progress on stderr: " << r.err;
  std::printf("%s", r.err.c_str());
  EXPECT_NE(r.out.find("5 files downloaded"), std::string::npos) << r.out;
}

TEST_F(Pull, DefaultDirectoryIsModelsName) {
  const CliRun r = pull("org/tiny -q");  // run in root_
  ASSERT_EQ(r.status, 0) << r.err;
  expect_complete(root_ / "models" / "tiny");
  EXPECT_TRUE(r.err.empty()) << "-q prints no progress: " << r.err;
}

TEST_F(Pull, ResumesPartFilesWithRange) {
  const fs::path d = root_ / "tiny";
  fs::create_directories(d);
  // Partial downloads of a redirected shard and a direct one.
  for (const char* f : {kShard1, kShard2}) {
    const std::string& bytes = hub_.file(f);
    std::ofstream(d / (std::string(f) + ".part"), std::ios::binary)
        << bytes.substr(0, bytes.size() / 3);
  }
  const CliRun r = pull("org/tiny --dir '" + d.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_complete(d);
  // "resumed at" is only printed when the server answered 206 from the requested offset.
  size_t resumed = 0;
  for (size_t p = r.err.find("resumed at"); p != std::string::npos;
       p = r.err.find("resumed at", p + 1))
    ++resumed;
  EXPECT_EQ(resumed, 2u) << r.err;
  for (const char* f : {kShard1, kShard2})
    EXPECT_EQ(count_log("get " + std::string(f) +
                        " bytes=" + std::to_string(hub_.file(f).size() / 3) + "-"),
              1u)
        << f << " resumed with a Range request";
}

TEST_F(Pull, InterruptedTransferKeepsPartAndResumes) {
  const fs::path d = root_ / "tiny";
  hub_.drop_once = true;
  const CliRun r1 = pull("org/tiny -q --dir '" + d.string() + "'");
  expect_one_line_error(r1, {kShard2, "network error", ".part", "resume"});
  const size_t kept = fs::file_size(d / (std::string(kShard2) + ".part"));
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, hub_.file(kShard2).size());
  const CliRun r2 = pull("org/tiny -q --dir '" + d.string() + "'");
  ASSERT_EQ(r2.status, 0) << r2.err;
  expect_complete(d);
  EXPECT_EQ(count_log("get " + std::string(kShard2) + " bytes=" + std::to_string(kept) + "-"), 1u);
}

TEST_F(Pull, SecondRunDownloadsNothing) {
  const fs::path d = root_ / "tiny";
  ASSERT_EQ(pull("org/tiny -q --dir '" + d.string() + "'").status, 0);
  const size_t gets = count_log("get ");
  const CliRun r = pull("org/tiny -q --dir '" + d.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_log("get "), gets);
  EXPECT_NE(r.out.find("0 files downloaded"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 already present"), std::string::npos) << r.out;
}

TEST_F(Pull, UnknownRepositoryIs404) {
  const CliRun r = pull("org/missing -q --dir '" + (root_ / "m").string() + "'");
  expect_one_line_error(r, {"org/missing", "404"});
}

TEST_F(Pull, MissingFileIs404NamingIt) {
  const CliRun r = pull("org/broken -q --dir '" + (root_ / "b").string() + "'");
  expect_one_line_error(r, {"tokenizer.json", "404"});
}

TEST_F(Pull, TokenIsSentAndRequired) {
  hub_.token = "hf_secret";
  const fs::path d = root_ / "tiny";
  expect_one_line_error(pull("org/tiny -q --dir '" + d.string() + "'"), {"401", "HF_TOKEN"});
  expect_one_line_error(pull("org/tiny -q --dir '" + d.string() + "'", "HF_TOKEN=hf_wrong"),
                        {"401", "HF_TOKEN cannot read", "Invalid credentials"});
  const CliRun r = pull("org/tiny -q --dir '" + d.string() + "'", "HF_TOKEN=hf_secret");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_complete(d);
}

TEST_F(Pull, NetworkFailureIsOneLine) {
  // A port nothing listens on: bind one, then close it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  close(fd);
  const std::string cmd = "env -u HF_TOKEN HF_ENDPOINT=http://127.0.0.1:" + std::to_string(port) +
                          " '" + LL_CLI_PATH + "' pull org/tiny -q --dir '" +
                          (root_ / "n").string() + "' >/dev/null 2>'" + (root_ / "err").string() +
                          "'";
  const int rc = std::system(cmd.c_str());
  CliRun r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.err = read_all(root_ / "err");
  expect_one_line_error(r, {"org/tiny", "network error"});
}

TEST_F(Pull, BadRepositoryName) {
  expect_one_line_error(pull("just-a-name -q"), {"just-a-name", "ORG/NAME"});
  expect_one_line_error(pull("org/../etc -q"), {"ORG/NAME"});
}

}  // namespace
