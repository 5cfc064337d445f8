#include "transport/ucx/ucx_windows.h"

#include <time.h>
#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/ucx/flag_order.h"

namespace collie {

bool ucxBuilt() { return true; }

namespace {

Status ucxError(const char* what, ucs_status_t status, const char* file, int line) {
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  Status st =
      Status::error(collieSystemError, "UCX: %s failed: %s (%s:%d)", what, ucs_status_string(status), base, line);
  COLLIE_WARN("%s", st.message().c_str());
  return st;
}

}  // namespace

}  // namespace collie

/// Checks a UCX call that returns ucs_status_t; logs file:line once.
#define COLLIE_CHECK_UCX(call)                                                                    \
  do {                                                                                            \
    const ucs_status_t collie_ucx_ = (call);                                                      \
    if (collie_ucx_ != UCS_OK) return ::collie::ucxError(#call, collie_ucx_, __FILE__, __LINE__); \
  } while (0)

namespace collie {

namespace {

// What each rank tells the others first: whether its UCX came up, and the
// size of the worker address that follows (it varies with transports and hosts).
struct Hello {
  uint32_t ok;
  uint32_t addressBytes;
};

// While one lives, UCX log lines from this thread are dropped: for a call
// whose failure we handle. A handler of our own filters them, installed once
// per process: UCX's handler stack is global, a thread-local flag is not.
thread_local bool tQuiet = false;
ucs_log_func_rc_t quietHandler(const char*, unsigned, const char*, ucs_log_level_t, const ucs_log_component_config_t*,
                               const char*, va_list) {
  return tQuiet ? UCS_LOG_FUNC_RC_STOP : UCS_LOG_FUNC_RC_CONTINUE;
}
class QuietUcxLog {
 public:
  QuietUcxLog() {
    static std::once_flag once;
    std::call_once(once, [] { ucs_log_push_handler(quietHandler); });
    tQuiet = true;
  }
  ~QuietUcxLog() { tQuiet = false; }
  QuietUcxLog(const QuietUcxLog&) = delete;
  QuietUcxLog& operator=(const QuietUcxLog&) = delete;
};

// Our one active message: `bytes` of data (maybe none) for `offset` in the
// receiver's window, then the value `value` for its counter at `flagOffset`.
// It lives in RemoteWindows::Op::header while the send is in flight.
enum WireField { kWireOffset = 0, kWireFlagOffset = 1, kWireValue = 2 };
constexpr unsigned kAmId = 0x43;  // 'C'
constexpr size_t kHeaderBytes = sizeof(RemoteWindows::Op::header);

// Slices up to this size travel inside the message (eager: one UCX transport
// fragment on sm and tcp, whose segments are 8 KiB). Larger ones go by
// rendezvous: the message arrives first, then UCX moves the data straight into
// the slot (zero-copy where the transport can: cma, RDMA) and tells the
// sender, whose staging slot is free only then.
constexpr size_t kInlineBytes = 8192 - 256;

struct FreeDeleter {
  void operator()(uint8_t* p) const { free(p); }
};

void sleepUpTo(long* ns) {
  timespec ts{0, *ns};
  nanosleep(&ts, nullptr);
  *ns = std::min(*ns * 2, 100000L);
}

class UcxWindows;

// Every UcxWindows of the process. A shutdown waiting for its peers to take
// in its messages also moves the workers nobody is using: a peer may be a rank of
// this very process, whose thread is the one waiting (ranks as threads
// destroyed one after another).
std::mutex gLiveMu;
std::vector<UcxWindows*>& liveWindows() {
  static std::vector<UcxWindows*> live;
  return live;
}

// The worker is used by its communicator's thread and, between that
// thread's calls, by shutdowns of other communicators: each use holds mu_.
class UcxWindows final : public RemoteWindows {
 public:
  explicit UcxWindows(int nranks) : peers_(static_cast<size_t>(nranks)) {}
  ~UcxWindows() override { close(); }
  UcxWindows(const UcxWindows&) = delete;
  UcxWindows& operator=(const UcxWindows&) = delete;

  /// Context and worker, with our message handler writing into `window`.
  Status open(uint8_t* window, size_t bytes, size_t endpoints);
  /// The endpoint to `peer`.
  Status connect(int peer, const uint8_t* address);
  const std::vector<uint8_t>& address() const { return address_; }

  void put(int peer, const void* src, size_t bytes, uint64_t offset, uint64_t flagOffset, uint64_t value,
           Op* op) override;
  bool idle(const Op& op) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return op.stage == kIdle || failed(op.peer);
  }
  void progress() override {
    std::lock_guard<std::mutex> lock(mu_);
    progressLocked();
  }
  bool quiet() const override;
  bool cudaMemory() const override { return cudaMemory_; }
  bool failed(int peer) const override {
    return peers_[static_cast<size_t>(peer)].failed.load(std::memory_order_acquire);
  }
  std::string failure(int peer) const override;
  uint8_t* allocate(size_t bytes) override;
  void shutdown(bool healthy) override;
  /// Joins liveWindows() (left in close()).
  void enlist();

 private:
  enum Stage { kIdle = 0, kSending = 1 };
  struct Peer {
    UcxWindows* owner = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    std::atomic<bool> failed{false};
    ucs_status_t status = UCS_OK;  // why it failed, and in what
    const char* what = "";
  };

  static void onError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t onMessage(void* arg, const void* header, size_t headerBytes, void* data, size_t bytes,
                                const ucp_am_recv_param_t* param);
  // A large slice whose data UCX fetches after its message (rendezvous).
  struct Fetch {
    UcxWindows* owner;
    uint64_t flagOffset, value;
  };
  static void onFetched(void* request, ucs_status_t status, size_t bytes, void* arg);
  /// The counter at `flagOffset` in our window may show `value` (FlagOrder permitting).
  void landed(uint64_t flagOffset, uint64_t value);
  void fail(int peer, const char* what, ucs_status_t status);
  /// True (and the request released) once *request is done or was never started.
  bool finished(void** request, int peer);
  /// Sends op's header, and `bytes` from `src` (maybe none), as one message.
  void send(Peer& p, Op* op, const void* src, size_t bytes);
  void progressLocked();
  /// Moves the other live workers of the process that nobody is using now.
  void progressOthers();
  void close();

  mutable std::mutex mu_;
  std::vector<Peer> peers_;   // sized once: endpoints' error handlers point into it
  std::vector<int> remotes_;  // ranks we have an endpoint to
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  uint8_t* window_ = nullptr;  // ours, where messages land
  size_t windowBytes_ = 0;
  FlagOrder flags_;  // of our window's counters, by offset
  std::vector<uint8_t> address_;
  std::vector<Op*> sending_;            // ops whose message is in flight
  std::vector<void*> closingRequests_;  // closes of endpoints whose peer failed
  bool enlisted_ = false;
  bool cudaMemory_ = false;           // UCX reports UCS_MEMORY_TYPE_CUDA among its memory types
  std::atomic<bool> closing_{false};  // peers going away now is expected
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> arenas_;
};

Status UcxWindows::open(uint8_t* window, size_t bytes, size_t endpoints) {
  ucp_config_t* config = nullptr;
  COLLIE_CHECK_UCX(ucp_config_read(nullptr, nullptr, &config));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_AM;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = endpoints;
  const ucs_status_t st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  COLLIE_CHECK_UCX(st);
  // Whether this UCX can move CUDA memory itself (Debian's cannot): reported at init.
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context_, &attr) == UCS_OK)
    cudaMemory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  // Serialized: calls on a communicator come from one thread at a time, not always the same one.
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  COLLIE_CHECK_UCX(ucp_worker_create(context_, &wp, &worker_));
  window_ = window;
  windowBytes_ = bytes;
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = kAmId;
  hp.cb = onMessage;
  hp.arg = this;
  COLLIE_CHECK_UCX(ucp_worker_set_am_recv_handler(worker_, &hp));

  ucp_address_t* addr = nullptr;
  size_t addrBytes = 0;
  COLLIE_CHECK_UCX(ucp_worker_get_address(worker_, &addr, &addrBytes));
  address_.assign(reinterpret_cast<const uint8_t*>(addr), reinterpret_cast<const uint8_t*>(addr) + addrBytes);
  ucp_worker_release_address(worker_, addr);

  return Status();
}

Status UcxWindows::connect(int peer, const uint8_t* address) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.owner = this;
  p.rank = peer;
  ucp_ep_params_t ep{};
  ep.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address);
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = onError;
  ep.err_handler.arg = &p;
  ucs_status_t st;
  {
    QuietUcxLog quiet;  // a refusal here is expected on some transports, not an error to print
    st = ucp_ep_create(worker_, &ep, &p.ep);
  }
  if (st == UCS_ERR_UNREACHABLE) {
    // No transport to this peer can tell that it died (UCX 1.13's shared
    // memory cannot): connect without, and let COLLIE_TIMEOUT find a dead peer.
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    st = ucp_ep_create(worker_, &ep, &p.ep);
    if (st == UCS_OK)
      COLLIE_INFO("UCX: no transport to rank %d detects peer failure; a dead peer shows as a timeout", peer);
  }
  COLLIE_CHECK_UCX(st);
  remotes_.push_back(peer);
  return Status();
}

void UcxWindows::onError(void* arg, ucp_ep_h, ucs_status_t status) {
  Peer* p = static_cast<Peer*>(arg);
  UcxWindows* self = p->owner;
  self->fail(p->rank, "endpoint", status);
  // Closed at once: nothing more goes to a peer that is gone.
  if (p->ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* req = ucp_ep_close_nbx(p->ep, &param);
  if (req != nullptr && !UCS_PTR_IS_ERR(req)) self->closingRequests_.push_back(req);
  p->ep = nullptr;
}

// A peer that finished and destroyed its communicator looks the same as one
// that died, so this is no warning: it matters only to a wait on that peer.
void UcxWindows::fail(int peer, const char* what, ucs_status_t status) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed.load()) return;
  p.status = status;
  p.what = what;
  p.failed.store(true, std::memory_order_release);
  if (!closing_.load()) COLLIE_INFO("%s", failure(peer).c_str());
}

std::string UcxWindows::failure(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.failed.load(std::memory_order_acquire)) return std::string();
  return std::string("UCX ") + p.what + " to rank " + std::to_string(peer) + " failed: " + ucs_status_string(p.status) +
         " (its process died, or its host cannot be reached)";
}

bool UcxWindows::quiet() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Op* op : sending_)
    if (!failed(op->peer)) return false;
  return true;
}

bool UcxWindows::finished(void** request, int peer) {
  if (*request == nullptr) return true;
  const ucs_status_t st = ucp_request_check_status(*request);
  if (st == UCS_INPROGRESS) return false;
  ucp_request_free(*request);
  *request = nullptr;
  if (st != UCS_OK) fail(peer, "transfer", st);
  return true;
}

void UcxWindows::put(int peer, const void* src, size_t bytes, uint64_t offset, uint64_t flagOffset, uint64_t value,
                     Op* op) {
  std::lock_guard<std::mutex> lock(mu_);
  op->request = nullptr;
  op->header[kWireOffset] = offset;
  op->header[kWireFlagOffset] = flagOffset;
  op->header[kWireValue] = value;
  op->peer = peer;
  op->stage = kIdle;
  if (failed(peer)) return;
  send(peers_[static_cast<size_t>(peer)], op, src, bytes);
}

void UcxWindows::send(Peer& p, Op* op, const void* src, size_t bytes) {
  if (p.ep == nullptr) {
    op->stage = kIdle;
    return fail(p.rank, "send", UCS_ERR_NOT_CONNECTED);
  }
  // No fence: the receiver orders a counter's values itself (FlagOrder).
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = bytes <= kInlineBytes ? UCP_AM_SEND_FLAG_EAGER : UCP_AM_SEND_FLAG_RNDV;
  void* req = ucp_am_send_nbx(p.ep, kAmId, op->header, kHeaderBytes, src, bytes, &param);
  if (UCS_PTR_IS_ERR(req)) {
    op->stage = kIdle;
    return fail(p.rank, "send", UCS_PTR_STATUS(req));
  }
  if (req == nullptr) {
    op->stage = kIdle;
    return;
  }
  op->request = req;
  op->stage = kSending;
  sending_.push_back(op);
}

ucs_status_t UcxWindows::onMessage(void* arg, const void* header, size_t headerBytes, void* data, size_t bytes,
                                   const ucp_am_recv_param_t* param) {
  UcxWindows* self = static_cast<UcxWindows*>(arg);
  uint64_t h[3] = {0, 0, 0};
  const bool eager = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0;
  if (headerBytes == kHeaderBytes) memcpy(h, header, sizeof(h));
  // A message that does not fit our window is dropped, never written: it
  // cannot come from a peer running this code with our layout.
  const bool fits = headerBytes == kHeaderBytes && h[kWireOffset] <= self->windowBytes_ &&
                    bytes <= self->windowBytes_ - h[kWireOffset] && h[kWireFlagOffset] % 8 == 0 &&
                    self->windowBytes_ >= 8 && h[kWireFlagOffset] <= self->windowBytes_ - 8;
  if (!fits) {
    COLLIE_WARN("UCX: dropped a message of %zu + %zu bytes that does not fit this window (%zu bytes)", headerBytes,
                bytes, self->windowBytes_);
    if (!eager) ucp_am_data_release(self->worker_, data);
    return UCS_OK;
  }
  if (eager) {
    if (bytes > 0) memcpy(self->window_ + h[kWireOffset], data, bytes);
    self->landed(h[kWireFlagOffset], h[kWireValue]);
    return UCS_OK;
  }
  // Rendezvous: UCX moves the data straight into the slot (zero-copy where
  // the transport can), and the counter follows once it is there.
  Fetch* fetch = new Fetch{self, h[kWireFlagOffset], h[kWireValue]};
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.recv_am = onFetched;
  rp.user_data = fetch;
  void* req = ucp_am_recv_data_nbx(self->worker_, data, self->window_ + h[kWireOffset], bytes, &rp);
  if (req == nullptr) {
    self->landed(fetch->flagOffset, fetch->value);
    delete fetch;
  } else if (UCS_PTR_IS_ERR(req)) {
    // The sender is gone or the transfer broke: the counter stays, and a wait
    // on that peer ends by its endpoint's error or by COLLIE_TIMEOUT.
    COLLIE_INFO("UCX: fetching a slice failed: %s", ucs_status_string(UCS_PTR_STATUS(req)));
    delete fetch;
  }
  return UCS_OK;
}

void UcxWindows::onFetched(void* request, ucs_status_t status, size_t, void* arg) {
  Fetch* fetch = static_cast<Fetch*>(arg);
  if (status == UCS_OK) {
    fetch->owner->landed(fetch->flagOffset, fetch->value);
  } else {
    COLLIE_INFO("UCX: fetching a slice failed: %s", ucs_status_string(status));
  }
  delete fetch;
  ucp_request_free(request);
}

void UcxWindows::landed(uint64_t flagOffset, uint64_t value) {
  const uint64_t show = flags_.arrive(flagOffset, value);
  if (show != 0) __atomic_store_n(reinterpret_cast<uint64_t*>(window_ + flagOffset), show, __ATOMIC_RELEASE);
}

void UcxWindows::progressLocked() {
  if (worker_ == nullptr) return;
  ucp_worker_progress(worker_);
  for (size_t i = 0; i < sending_.size();) {
    Op* op = sending_[i];
    if (finished(&op->request, op->peer)) {
      op->stage = kIdle;
      sending_[i] = sending_.back();
      sending_.pop_back();
    } else {
      ++i;
    }
  }
}

uint8_t* UcxWindows::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 4095) & ~size_t{4095};
  uint8_t* p = static_cast<uint8_t*>(aligned_alloc(4096, rounded));
  if (p == nullptr) throw std::bad_alloc();
  memset(p, 0, rounded);
  arenas_.emplace_back(p);
  return p;
}

void UcxWindows::enlist() {
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveWindows().push_back(this);
  enlisted_ = true;
}

void UcxWindows::progressOthers() {
  std::lock_guard<std::mutex> live(gLiveMu);
  for (UcxWindows* w : liveWindows()) {
    if (w == this) continue;
    std::unique_lock<std::mutex> lock(w->mu_, std::try_to_lock);
    if (lock.owns_lock()) w->progressLocked();
  }
}

void UcxWindows::shutdown(bool healthy) {
  // From here on peers going away is expected, not worth a warning.
  closing_.store(true);
  void* flush = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (worker_ == nullptr) return;
    ucp_request_param_t param{};
    flush = ucp_worker_flush_nbx(worker_, &param);
    if (UCS_PTR_IS_ERR(flush)) flush = nullptr;
  }
  // Our messages must be taken in before our endpoints go, even on a broken
  // communicator: a peer may still be fetching a large slice from our staging
  // (rendezvous). Bounded: a dead or busy peer may not answer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(healthy ? 5 : 1);
  long ns = 1000;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      progressLocked();
      if (flush == nullptr || ucp_request_check_status(flush) != UCS_INPROGRESS) break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      COLLIE_INFO("UCX: closing with messages the peers have not taken in after %d s", healthy ? 5 : 1);
      break;
    }
    progressOthers();
    sleepUpTo(&ns);
  }
  if (flush != nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    ucp_request_free(flush);
  }
  close();
}

void UcxWindows::close() {
  if (enlisted_) {
    std::lock_guard<std::mutex> live(gLiveMu);
    auto& all = liveWindows();
    all.erase(std::find(all.begin(), all.end(), this));
    enlisted_ = false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  closing_.store(true);
  // Requests still in flight are released now; the forced closes below complete them.
  for (Op* op : sending_)
    if (op->request != nullptr) ucp_request_free(op->request), op->request = nullptr;
  sending_.clear();

  std::vector<void*> closing;
  closing.swap(closingRequests_);
  for (int r : remotes_) {
    Peer& p = peers_[static_cast<size_t>(r)];
    if (p.ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* req = ucp_ep_close_nbx(p.ep, &param);
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
    p.ep = nullptr;
  }
  remotes_.clear();
  // A forced close needs no peer; bound the wait anyway.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!closing.empty() && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker_);
    for (size_t i = 0; i < closing.size();) {
      if (ucp_request_check_status(closing[i]) != UCS_INPROGRESS) {
        ucp_request_free(closing[i]);
        closing[i] = closing.back();
        closing.pop_back();
      } else {
        ++i;
      }
    }
  }
  // A forced close leaves UCX discarding the endpoints' transport parts in
  // later progress calls; let them finish, briefly, before the worker goes.
  if (worker_ != nullptr) {
    const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (ucp_worker_progress(worker_) != 0 && std::chrono::steady_clock::now() < settle) {
    }
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_ != nullptr) ucp_cleanup(context_);
  context_ = nullptr;
}

}  // namespace

Status createUcxWindows(Bootstrap* bootstrap, const std::vector<bool>& remote, uint8_t* window, size_t windowBytes,
                        std::unique_ptr<RemoteWindows>* out) {
  const int rank = bootstrap->rank(), n = bootstrap->nranks();
  const size_t endpoints = static_cast<size_t>(std::count(remote.begin(), remote.end(), true));
  auto w = std::make_unique<UcxWindows>(n);
  const Status opened = w->open(window, windowBytes, endpoints);

  // Every rank learns whether every rank's UCX came up, so none waits for a peer that gave up.
  std::vector<Hello> hellos(static_cast<size_t>(n));
  Hello& me = hellos[static_cast<size_t>(rank)];
  me.ok = opened.ok() ? 1 : 0;
  me.addressBytes = static_cast<uint32_t>(w->address().size());
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(hellos.data(), sizeof(Hello)));
  if (!opened.ok()) return opened;
  size_t stride = 0;
  for (int r = 0; r < n; ++r) {
    const Hello& h = hellos[static_cast<size_t>(r)];
    if (!h.ok) return Status::error(collieRemoteError, "rank %d could not start UCX (its log says why)", r);
    stride = std::max<size_t>(stride, h.addressBytes);
  }

  // Then the worker addresses, each padded to the longest.
  std::vector<uint8_t> blobs(static_cast<size_t>(n) * stride);
  memcpy(blobs.data() + static_cast<size_t>(rank) * stride, w->address().data(), w->address().size());
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(blobs.data(), stride));

  Status connected;
  for (int r = 0; r < n && connected.ok(); ++r) {
    if (!remote[static_cast<size_t>(r)]) continue;
    const uint8_t* blob = blobs.data() + static_cast<size_t>(r) * stride;
    connected = w->connect(r, blob).withContext("endpoint to rank " + std::to_string(r));
  }
  std::vector<uint8_t> ok(static_cast<size_t>(n));
  ok[static_cast<size_t>(rank)] = connected.ok() ? 1 : 0;
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(ok.data(), 1));
  if (!connected.ok()) return connected;
  for (int r = 0; r < n; ++r)
    if (!ok[static_cast<size_t>(r)])
      return Status::error(collieRemoteError, "rank %d could not open UCX endpoints to its peers on other hosts", r);
  COLLIE_INFO("UCX: endpoints to %zu ranks on other hosts (worker address %zu bytes); this UCX %s CUDA memory",
              endpoints, w->address().size(), w->cudaMemory() ? "can move" : "cannot move");
  w->enlist();
  *out = std::move(w);
  return Status();
}

}  // namespace collie
