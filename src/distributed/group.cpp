#include "mimic/distributed/group.h"

// ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO, which Torch's CMake package defines for its
// consumers; the gloo headers it includes come with libgloo-dev (tools/setup.sh) on Debian. A pip torch ships no
// gloo headers: CMake then builds this file with MIMIC_HAVE_GLOO=0, and a distributed run says why it cannot start
// (the collectives go through the process group's base class, which needs no gloo header).
#ifndef MIMIC_HAVE_GLOO
#define MIMIC_HAVE_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#if MIMIC_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/torch.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "mimic/core/checked_device.h"
#include "mimic/core/error.h"
#include "mimic/distributed/group_detail.h"
#include "mimic/distributed/launch.h"

namespace mimic::distributed {

namespace detail {

int64_t bucket_bytes(double mb) {
  MIMIC_CHECK(mb > 0 && mb <= 4096, "the all-reduce bucket size must be in (0, 4096] MB, got ", mb);
  return static_cast<int64_t>(mb * 1048576.0);
}

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

at::Tensor pack(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
  return torch::cat(parts);
}

void unpack(const at::Tensor& flat, std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (auto& t : tensors) {
    t.copy_(flat.slice(0, offset, offset + t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace detail

namespace {

using namespace detail;
using Clock = std::chrono::steady_clock;

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
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<c10d::Backend> pg;  // a ProcessGroupGloo (2.x: a Backend)
#else
  c10::intrusive_ptr<c10d::ProcessGroup> pg;  // a ProcessGroupGloo
#endif
  int64_t alone_round = 0;  // each_alone's calls, the same count on every rank: each gets keys of its own

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
    // (Debian's LibTorch logs through glog; official builds, 2.x among them, through c10's own logger, whose
    // threshold is caffe2_log_level: both gate c10d's messages.)
#ifdef C10_USE_GLOG
    auto& log_level = FLAGS_minloglevel;  // glog's own threshold (Debian's LibTorch is built with glog)
    const int kFatal = google::GLOG_FATAL;
#else
    auto& log_level = FLAGS_caffe2_log_level;  // c10's logger (the official builds)
    const int kFatal = c10::GLOG_FATAL;
#endif
    struct Restore {
      decltype(log_level)& flag;
      const int level;
      ~Restore() { flag = level; }
    } restore{log_level, static_cast<int>(log_level)};
    log_level = kFatal;
    // What can be told before c10d tries is told in mimic's words: its own messages for these were a blamed port
    // ("is the port in use?" for an address not of this machine) or "ready or not_ready response expected" (F8).
    // A name may resolve only later (a cluster's service for rank 0 appears after its workers start): retried until
    // the timeout, as c10d retries its connection.
    for (const auto until = Clock::now() + timeout();;) {
      const auto why = unresolved_address(env.master_addr);
      if (why.empty()) break;
      if (Clock::now() > until)
        fail("MASTER_ADDR ", env.master_addr, " does not resolve (", why, ") within ", env.timeout_seconds,
             " s (MIMIC_DIST_TIMEOUT): give the name or IP address of rank 0's machine");
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (env.rank == 0)
      if (const auto why = port_taken(env.master_port); !why.empty())
        fail("MASTER_PORT ", env.master_port, " is taken on this machine (", why, "): another run or program listens there; give each run its own MASTER_PORT");
    try {
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    } catch (const std::exception& e) {
      if (env.rank == 0 && !is_local_address(env.master_addr))
        fail("rank 0 hosts the rendezvous store but could not reach it at MASTER_ADDR:MASTER_PORT = ", where(), " (",
             first_line(e.what()), "): ", env.master_addr, " is not an address of this machine; run rank 0 where MASTER_ADDR points");
      if (env.rank == 0)
        fail("could not open the rendezvous store at MASTER_ADDR:MASTER_PORT = ", where(), " (", first_line(e.what()), ")");
      fail("could not reach rank 0's rendezvous store at MASTER_ADDR:MASTER_PORT = ", where(), " within ", env.timeout_seconds,
           " s (", first_line(e.what()), "): is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?");
    }
  }

  // Every rank checks in with its rank and WORLD_SIZE; rank 0 waits for all of them, checks that they agree, and
  // writes its verdict, which the others wait for. Errors are decided in one place and every rank reports the same.
  void check_in() {
    if (env.rank == 0) {
      // rank 0's own store answering in a foreign protocol: what listens at MASTER_ADDR:MASTER_PORT is not this store
      // (c10d said only "ready or not_ready response expected": the sixth probe of 2026-11-28)
      try {
        return check_in_with_store();
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        fail("the rendezvous at MASTER_ADDR:MASTER_PORT = ", where(), " failed (", first_line(e.what()),
             "): what answers there is not rank 0's store; is another program listening at that address and port?");
      }
    }
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
    // one process more than WORLD_SIZE, after the group was complete: rank 0 has decided without it, and gloo then
    // blamed a rank 0 that was alive (the sixth probe of 2026-11-28, two processes given RANK=1)
    if (env.rank != 0 && k > env.world_size)
      fail("this process checked in as number ", k, " of WORLD_SIZE=", env.world_size, " at ", where(),
           ": another process has RANK=", env.rank, " (each rank in 0..", env.world_size - 1, " must be given to exactly one process)");
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
#if !MIMIC_HAVE_GLOO
    require_multi_process();
#else
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
#endif
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
  void by_bucket(const std::vector<at::Tensor>& tensors, F&& op, double bucket_mb = kDefaultBucketMb) {
    const int64_t cap = bucket_bytes(bucket_mb);
    torch::NoGradGuard no_grad;
    std::vector<c10::ScalarType> dtypes;
    for (const auto& t : tensors)
      if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end()) dtypes.push_back(t.scalar_type());
    for (auto dtype : dtypes) {
      std::vector<at::Tensor> bucket;
      int64_t bytes = 0;
      auto flush = [&] {
        if (bucket.empty()) return;
        auto flat = pack(bucket);
        op(flat);
        unpack(flat, bucket);
        bucket.clear();
        bytes = 0;
      };
      for (const auto& t : tensors) {
        if (t.scalar_type() != dtype) continue;
        if (bytes > 0 && bytes + static_cast<int64_t>(t.nbytes()) > cap) flush();
        bucket.push_back(t);
        bytes += static_cast<int64_t>(t.nbytes());
      }
      flush();
    }
  }
};

namespace {
// A rendezvous c10d cannot end by itself — a program at MASTER_ADDR:MASTER_PORT that accepts and never answers: its
// client waits on the socket with no timeout (a rank waited 95 s with MIMIC_DIST_TIMEOUT=5, the sixth probe of
// 2026-11-28) — ends here, in one line, when the timeout and a margin have passed.
class Watchdog {
 public:
  Watchdog(int64_t seconds, std::string line)
      : thread_([this, seconds, line = std::move(line)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) return;
          std::fprintf(stderr, "mimic: error: %s%s\n", rank_prefix().c_str(), line.c_str());
          std::fflush(stderr);
          std::_Exit(1);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members it reads exist
};
}  // namespace

Group::Group(const Environment& env) : impl_(std::make_unique<Impl>()) {
  impl_->env = env;
  rank_ = env.rank;
  size_ = env.world_size;
  if (!env.distributed()) return;
  // A peer's closed socket must be an error of the write, not a SIGPIPE that kills this process silently.
  std::signal(SIGPIPE, SIG_IGN);
  {
    Watchdog watchdog(2 * env.timeout_seconds + 10,
                      "no rendezvous at MASTER_ADDR:MASTER_PORT = " + impl_->where() + " within " + std::to_string(2 * env.timeout_seconds + 10) +
                          " s: what listens there does not answer as rank 0's store (is another program using MASTER_PORT?)");
    impl_->connect();
    impl_->check_in();
  }
  impl_->create_group();
}

Group::~Group() = default;

void Group::average(const std::vector<at::Tensor>& tensors, const std::string& what, double bucket_mb) {
  if (size_ == 1) return;
  impl_->by_bucket(
      tensors,
      [&](at::Tensor& flat) {
        std::vector<at::Tensor> v{as_library_tensor(flat)};  // Gloo takes CPU and CUDA tensors
        impl_->run(what, [&] { return impl_->pg->allreduce(v); });
        flat.div_(size_);
      },
      bucket_mb);
}

double Group::average(double value, const std::string& what) {
  if (size_ == 1) return value;
  auto t = torch::tensor({value}, torch::kDouble);
  average({t}, what);
  return t.item<double>();
}

void Group::broadcast(const std::vector<at::Tensor>& tensors, const std::string& what, int root) {
  if (size_ == 1) return;
  MIMIC_CHECK(root >= 0 && root < size_, what, ": the root rank must be in [0, ", size_ - 1, "], got ", root);
  c10d::BroadcastOptions options;
  options.rootRank = root;
  impl_->by_bucket(tensors, [&](at::Tensor& flat) {
    std::vector<at::Tensor> v{as_library_tensor(flat)};  // Gloo takes CPU and CUDA tensors
    impl_->run(what, [&] { return impl_->pg->broadcast(v, options); });
  });
}

std::string Group::broadcast(const std::string& value, const std::string& what, int root) {
  if (size_ == 1) return value;
  auto n = torch::tensor({static_cast<int64_t>(value.size())}, torch::kLong);
  broadcast({n}, what, root);
  auto b = torch::zeros({n.item<int64_t>()}, torch::kUInt8);
  if (rank_ == root) std::memcpy(b.data_ptr<uint8_t>(), value.data(), value.size());
  if (b.numel() > 0) broadcast({b}, what, root);
  return std::string(reinterpret_cast<const char*>(b.data_ptr<uint8_t>()), static_cast<size_t>(b.numel()));
}

std::string Group::from_lead(const std::string& what, const std::function<std::string()>& lead_work) {
  if (size_ == 1) return lead_work();
  // the first byte says which it is: '+' the result, '!' rank 0's error
  std::string message;
  if (lead()) {
    try {
      message = "+" + lead_work();
    } catch (const Error& e) {
      message = std::string("!") + e.what();
    }
  }
  message = broadcast(message, what);
  MIMIC_CHECK(!message.empty(), what, ": rank 0 sent nothing");
  if (message[0] == '!') {
    if (lead()) throw Error(message.substr(1));
    fail("rank 0 could not start: ", message.substr(1));
  }
  return message.substr(1);
}

void Group::barrier(const std::string& what) {
  if (size_ == 1) return;
  impl_->run(what, [&] { return impl_->pg->barrier(); });
}

void Group::each_alone(const std::string& what, const std::function<void()>& work) {
  if (size_ == 1) return work();
  auto& store = *impl_->store;
  const std::string key = "mimic/alone/" + std::to_string(impl_->alone_round++) + "/";
  auto of = [&](const char* kind, int r) { return key + kind + "/" + std::to_string(r); };
  // The heartbeat: a counter in the store that this rank raises every second while its work runs. (TCPStore
  // serialises its operations, so this thread and the main one may share it.)
  std::atomic<bool> stop{false};
  std::thread beat([&] {
    while (!stop) {
      try {
        store.add(of("beat", rank_), 1);
      } catch (const std::exception&) {
        return;  // the store is gone: the main thread finds out when it next asks
      }
      for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& beat;
    ~Join() {
      stop = true;
      beat.join();
    }
  } join{stop, beat};
  try {
    work();
  } catch (const std::exception& e) {
    try {
      store.set(of("failed", rank_), bytes(first_line(e.what())));
    } catch (const std::exception&) {
    }
    throw;
  }
  try {
    store.set(of("done", rank_), bytes("1"));
    std::vector<int64_t> beats(size_, -1);
    std::vector<Clock::time_point> changed(size_, Clock::now());
    for (;;) {
      bool all = true;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || store.check({of("done", r)})) continue;
        all = false;
        if (store.check({of("failed", r)}))
          fail(what, " failed: rank ", r, " ended with an error (", text(store.get(of("failed", r))), ")");
        const int64_t b = store.add(of("beat", r), 0);
        if (b != beats[r]) {
          beats[r] = b;
          changed[r] = Clock::now();
        } else if (Clock::now() - changed[r] > impl_->timeout()) {
          fail(what, " failed: rank ", r, " stopped answering (no sign of life for ", impl_->env.timeout_seconds,
               " s, MIMIC_DIST_TIMEOUT)");
        }
      }
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, " failed: rank 0 (it hosts the rendezvous store at ", impl_->where(), ") is gone (", first_line(e.what()), ")");
  }
}

std::function<void()> Group::start_sum(const at::Tensor& flat) {
  std::vector<at::Tensor> v{as_library_tensor(flat)};  // Gloo takes CPU and CUDA tensors
  auto work = impl_->pg->allreduce(v);
  return [work] { work->wait(); };
}

void Group::collective_failed(const std::string& what, const std::exception& e) { impl_->failed(what, e); }

Group& single() {
  static Group group{Environment{}};
  return group;
}

Group& world() {
  static std::unique_ptr<Group> group;
  if (!group) group = std::make_unique<Group>(environment());
  return *group;
}

bool multi_process_supported() { return MIMIC_HAVE_GLOO; }

void require_multi_process() {
  MIMIC_CHECK(multi_process_supported(),
              "this mimic was built without Gloo's headers (the LibTorch it was built against ships none), so it cannot "
              "run distributed; build against a LibTorch with them (Debian's libtorch-dev with libgloo-dev)");
}

}  // namespace mimic::distributed
