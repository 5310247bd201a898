#include "mimic/distributed/group.h"

// ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO, which Torch's CMake package defines for its
// consumers; the gloo headers it includes come with libgloo-dev (tools/setup.sh).
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <csignal>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "mimic/core/error.h"

namespace mimic::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// Largest bucket in elements (16 MB of float32): few messages per step, without doubling the memory of a large
// model's gradients in one copy.
constexpr int64_t kBucketElements = int64_t{4} << 20;

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

}  // namespace

struct Group::Impl {
  Environment env;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;

  std::string where() const { return env.master_addr + ":" + std::to_string(env.master_port); }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(int64_t{1000} * env.timeout_seconds); }

  // The processes that have checked in so far: rank -> the WORLD_SIZE each one has.
  std::vector<std::pair<int, int>> arrivals() {
    const int64_t n = store->add("mimic/arrived", 0);
    std::vector<std::pair<int, int>> a;
    for (int64_t i = 1; i <= n; ++i) {
      const std::string key = "mimic/arrival/" + std::to_string(i);
      // the counter is raised before the entry is written: an entry not there yet is read on the next round
      if (!store->check({key})) continue;
      auto v = text(store->get(key));
      a.emplace_back(std::stoi(v.substr(0, v.find(' '))), std::stoi(v.substr(v.find(' ') + 1)));
    }
    return a;
  }

  std::vector<int> missing(const std::vector<std::pair<int, int>>& arrived) const {
    std::set<int> here;
    for (const auto& [r, w] : arrived) here.insert(r);
    std::vector<int> m;
    for (int r = 0; r < env.world_size; ++r)
      if (!here.count(r)) m.push_back(r);
    return m;
  }

  void connect() {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0;
    o.numWorkers = static_cast<size_t>(env.world_size);
    o.waitWorkers = false;  // the check-in below waits, and can name who is missing
    o.timeout = timeout();
    // c10d logs every failed connection attempt through glog on stderr; the one error below says what happened.
    const int log_level = FLAGS_minloglevel;
    FLAGS_minloglevel = google::GLOG_FATAL;
    struct Restore {
      int level;
      ~Restore() { FLAGS_minloglevel = level; }
    } restore{log_level};
    try {
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    } catch (const std::exception& e) {
      if (env.rank == 0)
        fail("could not open the rendezvous store on MASTER_PORT ", env.master_port, " (", first_line(e.what()),
             "): is the port in use by another run?");
      fail("could not reach rank 0's rendezvous store at MASTER_ADDR:MASTER_PORT = ", where(), " within ", env.timeout_seconds,
           " s (", first_line(e.what()), "): is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?");
    }
  }

  // Every rank checks in with its rank and WORLD_SIZE; rank 0 waits for all of them, checks that they agree, and
  // writes its verdict, which the others wait for. Errors are decided in one place and every rank reports the same.
  void check_in() {
    if (env.rank == 0) return check_in_with_store();
    try {
      check_in_with_store();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail("rank 0 (it hosts the rendezvous store at ", where(), ") ended before the group was complete (", first_line(e.what()), ")");
    }
  }

  void check_in_with_store() {
    const auto deadline = Clock::now() + timeout();
    const int64_t k = store->add("mimic/arrived", 1);
    store->set("mimic/arrival/" + std::to_string(k), bytes(std::to_string(env.rank) + " " + std::to_string(env.world_size)));
    const std::string verdict_key = "mimic/verdict";
    if (env.rank == 0) {
      std::string verdict;
      while (verdict.empty()) {
        const auto a = arrivals();
        std::map<int, int> seen;
        for (const auto& [r, w] : a) {
          if (w != env.world_size)
            verdict = "a process with RANK=" + std::to_string(r) + " has WORLD_SIZE=" + std::to_string(w) + ", rank 0 has WORLD_SIZE=" +
                      std::to_string(env.world_size) + ": every process must be given the same WORLD_SIZE";
          else if (++seen[r] > 1)
            verdict = "two processes have RANK=" + std::to_string(r) + ": each rank in 0.." + std::to_string(env.world_size - 1) +
                      " must be given to exactly one process";
        }
        if (verdict.empty() && missing(a).empty()) verdict = "ok";
        if (verdict.empty() && Clock::now() > deadline)
          verdict = "waited " + std::to_string(env.timeout_seconds) + " s (MIMIC_DIST_TIMEOUT) for WORLD_SIZE=" +
                    std::to_string(env.world_size) + " processes at " + where() + ": " + rank_list(missing(a)) + " never arrived";
        if (verdict.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      store->set(verdict_key, bytes(verdict));
      if (verdict == "ok") return;
      // The store lives in this process: give the others a moment to read the verdict before it goes away.
      const int64_t others = static_cast<int64_t>(arrivals().size()) - 1;
      const auto until = Clock::now() + std::chrono::seconds(3);
      while (store->add("mimic/verdict_read", 0) < others && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      fail(verdict);
    }
    // Rank 0 decides at its deadline; a little slack lets its verdict arrive before this rank gives up on its own.
    const auto own_deadline = deadline + std::chrono::seconds(5);
    while (!store->check({verdict_key})) {
      if (Clock::now() > own_deadline)
        fail("waited ", env.timeout_seconds, " s (MIMIC_DIST_TIMEOUT) for WORLD_SIZE=", env.world_size, " processes at ", where(), ": ",
             rank_list(missing(arrivals())), " never arrived");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto verdict = text(store->get(verdict_key));
    store->add("mimic/verdict_read", 1);
    if (verdict != "ok") fail(verdict);
  }

  void create_group() {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout());
    // On one machine the loopback device always works; across machines Gloo picks the interface of this host's
    // name, or the one GLOO_SOCKET_IFNAME names (as PyTorch does).
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback(env.master_addr))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;  // the collectives run one at a time; the cores belong to the training
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", store);
    try {
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, env.rank, env.world_size, options);
    } catch (const std::exception& e) {
      failed("connecting the process group", e);
    }
  }

  // A collective failed: a peer died (Gloo saw its connection close) or did not answer within the timeout. The
  // survivors check in through the store; whoever has not within a few seconds is named. When the store itself
  // does not answer, rank 0, which hosts it, is gone.
  [[noreturn]] void failed(const std::string& what, const std::exception& e) {
    const std::string detail = first_line(e.what());
    std::vector<int> silent;
    try {
      store->set("mimic/alive/" + std::to_string(env.rank), bytes("1"));
      const auto until = Clock::now() + std::min<std::chrono::milliseconds>(timeout(), std::chrono::seconds(5));
      for (;;) {
        silent.clear();
        for (int r = 0; r < env.world_size; ++r)
          if (!store->check({"mimic/alive/" + std::to_string(r)})) silent.push_back(r);
        if (silent.empty() || Clock::now() > until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const std::exception&) {
      fail(what, " failed: rank 0 (it hosts the rendezvous store at ", where(), ") is gone (", detail, ")");
    }
    if (silent.empty()) fail(what, " failed on every rank (", detail, ")");
    fail(what, " failed: ", rank_list(silent), " stopped answering (", detail, ")");
  }

  template <typename F>
  void run(const std::string& what, F&& op) {
    try {
      op()->wait();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      failed(what, e);
    }
  }

  // Packs `tensors` into flat buckets of one dtype each, hands every bucket to `op`, and copies the results back.
  template <typename F>
  void by_bucket(const std::vector<at::Tensor>& tensors, F&& op) {
    torch::NoGradGuard no_grad;
    std::vector<c10::ScalarType> dtypes;
    for (const auto& t : tensors)
      if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end()) dtypes.push_back(t.scalar_type());
    for (auto dtype : dtypes) {
      std::vector<at::Tensor> bucket;
      int64_t elements = 0;
      auto flush = [&] {
        if (bucket.empty()) return;
        std::vector<at::Tensor> flat_parts;
        for (const auto& t : bucket) flat_parts.push_back(t.reshape({-1}));
        auto flat = torch::cat(flat_parts);
        op(flat);
        int64_t offset = 0;
        for (auto& t : bucket) {
          t.copy_(flat.slice(0, offset, offset + t.numel()).view(t.sizes()));
          offset += t.numel();
        }
        bucket.clear();
        elements = 0;
      };
      for (const auto& t : tensors) {
        if (t.scalar_type() != dtype) continue;
        if (elements > 0 && elements + t.numel() > kBucketElements) flush();
        bucket.push_back(t);
        elements += t.numel();
      }
      flush();
    }
  }
};

Group::Group(const Environment& env) : impl_(std::make_unique<Impl>()) {
  impl_->env = env;
  rank_ = env.rank;
  size_ = env.world_size;
  if (!env.distributed()) return;
  // A peer's closed socket must be an error of the write, not a SIGPIPE that kills this process silently.
  std::signal(SIGPIPE, SIG_IGN);
  impl_->connect();
  impl_->check_in();
  impl_->create_group();
}

Group::~Group() = default;

void Group::average(const std::vector<at::Tensor>& tensors, const std::string& what) {
  if (size_ == 1) return;
  impl_->by_bucket(tensors, [&](at::Tensor& flat) {
    std::vector<at::Tensor> v{flat};
    impl_->run(what, [&] { return impl_->pg->allreduce(v); });
    flat.div_(size_);
  });
}

double Group::average(double value, const std::string& what) {
  if (size_ == 1) return value;
  auto t = torch::tensor({value}, torch::kDouble);
  average({t}, what);
  return t.item<double>();
}

void Group::broadcast(const std::vector<at::Tensor>& tensors, const std::string& what) {
  if (size_ == 1) return;
  impl_->by_bucket(tensors, [&](at::Tensor& flat) {
    std::vector<at::Tensor> v{flat};
    impl_->run(what, [&] { return impl_->pg->broadcast(v); });
  });
}

std::string Group::broadcast(const std::string& value, const std::string& what) {
  if (size_ == 1) return value;
  auto n = torch::tensor({static_cast<int64_t>(value.size())}, torch::kLong);
  broadcast({n}, what);
  auto b = torch::zeros({n.item<int64_t>()}, torch::kUInt8);
  if (lead()) std::memcpy(b.data_ptr<uint8_t>(), value.data(), value.size());
  if (b.numel() > 0) broadcast({b}, what);
  return std::string(reinterpret_cast<const char*>(b.data_ptr<uint8_t>()), static_cast<size_t>(b.numel()));
}

void Group::barrier(const std::string& what) {
  if (size_ == 1) return;
  impl_->run(what, [&] { return impl_->pg->barrier(); });
}

Group& world() {
  static std::unique_ptr<Group> group;
  if (!group) group = std::make_unique<Group>(environment());
  return *group;
}

}  // namespace mimic::distributed
