// Local launcher: forks N ranks of one command with the rendezvous environment, relays their output line by
// line, forwards stop signals and tears the whole job down when one rank fails.
#include "tools/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace collie {
namespace launcher {
namespace {

// Signals a launcher forwards to its ranks.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};
// Signals whose disposition run() changes for its own duration.
constexpr int kManagedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
// Marks a self-pipe byte whose signal came from the terminal driver (it already reached the whole foreground
// process group, ranks included).
constexpr unsigned char kFromKernel = 0x80;
constexpr size_t kReadChunk = 64 * 1024;
// A rank printing a longer line without newline gets it broken here rather than buffered without bound.
constexpr size_t kMaxPartialLine = 1 << 20;
constexpr char kName[] = "collie-run";

// Write end of the self-pipe; the handler only needs an int, and only one run() is active at a time.
volatile sig_atomic_t gSignalPipeWrite = -1;
std::atomic<bool> gRunning{false};

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

void onSignal(int sig, siginfo_t* info, void*) {
  int savedErrno = errno;
  int fd = gSignalPipeWrite;
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(sig);
    if (info != nullptr && info->si_code == SI_KERNEL) byte |= kFromKernel;
    // A full pipe already guarantees a wakeup; a lost byte can then only be a duplicate SIGCHLD.
    ssize_t ignored = ::write(fd, &byte, 1);
    (void)ignored;
  }
  errno = savedErrno;
}

// Keeps pipe ends off fds 0-2 so the dup2 calls in the child cannot clobber one another even when the caller
// runs with a standard fd closed.
bool makePipe(UniqueFd* readEnd, UniqueFd* writeEnd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  for (int& fd : fds) {
    if (fd < 3) {
      int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      ::close(fd);
      fd = moved;
    }
  }
  readEnd->reset(fds[0]);
  writeEnd->reset(fds[1]);
  return readEnd->valid() && writeEnd->valid();
}

bool setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// Binds `port` on loopback (0: any) without SO_REUSEADDR, so a port held by any socket in any state fails;
// returns the bound port, or -1.
int tryBindLoopback(int port) {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  socklen_t len = sizeof(addr);
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return ntohs(addr.sin_port);
}

// Racy by nature (the port is free again once we close it, until rank 0 binds it), but it keeps the launcher
// free of any protocol with rank 0. The race is narrowed by drawing below the kernel's ephemeral range: a port
// there is never handed to an outgoing connection (UCX lanes, other jobs' rings), only to someone asking for
// it by number. Port 0 (the kernel's pick, inside that range) is the fallback.
int pickFreePort() {
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  constexpr int kFirst = 10000;
  if (low > kFirst + 1000) {
    uint32_t draw[32];
    if (::getrandom(draw, sizeof(draw), 0) == static_cast<ssize_t>(sizeof(draw))) {
      for (uint32_t d : draw) {
        int port = tryBindLoopback(kFirst + static_cast<int>(d % static_cast<uint32_t>(low - kFirst)));
        if (port > 0) return port;
      }
    }
  }
  return tryBindLoopback(0);
}

bool makeSecret(std::string* hex) {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  static const char kDigits[] = "0123456789abcdef";
  hex->clear();
  for (unsigned char b : bytes) {
    hex->push_back(kDigits[b >> 4]);
    hex->push_back(kDigits[b & 0xf]);
  }
  return true;
}

// Returns false once the destination is gone (EPIPE and the like); the caller then drops that stream's output
// instead of dying from SIGPIPE while ranks are still running.
bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // The caller's stdout may be non-blocking; wait rather than drop output.
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void complain(const std::string& message) {
  std::string line = std::string(kName) + ": " + message + "\n";
  writeAll(STDERR_FILENO, line.data(), line.size());
}

// Where one pipe of one rank goes: its parent-side read end, the unfinished last line, and the launcher's fd.
struct Stream {
  UniqueFd fd;
  std::string partial;
  int dest = STDOUT_FILENO;
};

struct Rank {
  pid_t pid = -1;
  bool alive = false;
  Stream out;
  Stream err;
};

class Job {
 public:
  explicit Job(const Options& opts) : opts_(opts), ranks_(static_cast<size_t>(opts.nprocs)) {}
  ~Job();

  int run();

 private:
  bool installSignals();
  void restoreSignals();
  std::vector<std::string> buildEnv(int rank) const;
  bool spawnAll();
  bool spawn(int rank, const std::vector<std::string>& env);
  [[noreturn]] void execChild(int rank, int outFd, int errFd, char* const* argv, char* const* envp);
  void loop();
  void handleSignalBytes();
  // kOnce: one read; kDrain: until the pipe is empty; kDrainAndClose: then close it even without EOF.
  enum class ReadMode { kOnce, kDrain, kDrainAndClose };
  void readStream(Stream* s, const std::string& prefix, ReadMode mode);
  void drainRank(size_t rank, ReadMode mode);
  void emit(Stream* s, const std::string& prefix, bool atEof);
  void closeStream(Stream* s, const std::string& prefix);
  void reap();
  void signalAlive(int sig);
  void startStopping(int sig);
  bool anyAlive() const;
  std::string prefixFor(size_t rank) const {
    return opts_.prefixOutput ? "[" + std::to_string(rank) + "] " : std::string();
  }

  const Options& opts_;
  std::vector<Rank> ranks_;
  std::string root_;
  std::string secret_;
  UniqueFd sigRead_;
  UniqueFd sigWrite_;
  UniqueFd devNull_;
  rlimit oldFileLimit_ = {};
  bool fileLimitRaised_ = false;
  struct sigaction oldActions_[NSIG] = {};
  bool changed_[NSIG] = {};
  sigset_t oldMask_;
  bool signalsInstalled_ = false;
  // First of: a rank failing (failedRank_ >= 0) or the launcher being told to stop (stopSignal_ > 0).
  int failedRank_ = -1;
  int failCode_ = 0;
  int stopSignal_ = 0;
  bool killArmed_ = false;
  bool killSent_ = false;
  std::chrono::steady_clock::time_point killAt_;
};

Job::~Job() {
  // Only reached with live children when setup failed half way; none may outlive the launcher unreaped.
  for (Rank& r : ranks_) {
    if (r.alive) {
      ::kill(r.pid, SIGKILL);
      while (::waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      r.alive = false;
    }
  }
  restoreSignals();
  if (fileLimitRaised_) ::setrlimit(RLIMIT_NOFILE, &oldFileLimit_);
}

bool Job::installSignals() {
  if (!makePipe(&sigRead_, &sigWrite_) || !setNonBlocking(sigRead_.get()) || !setNonBlocking(sigWrite_.get())) {
    return false;
  }
  gSignalPipeWrite = sigWrite_.get();
  sigemptyset(&oldMask_);
  ::pthread_sigmask(SIG_SETMASK, nullptr, &oldMask_);
  struct sigaction act = {};
  act.sa_sigaction = onSignal;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&act.sa_mask);
  for (int sig : kManagedSignals) {
    if (::sigaction(sig, nullptr, &oldActions_[sig]) != 0) continue;
    if (sig == SIGPIPE) {
      struct sigaction ignore = {};
      ignore.sa_handler = SIG_IGN;
      ::sigaction(sig, &ignore, nullptr);
    } else if (oldActions_[sig].sa_handler == SIG_IGN && sig != SIGCHLD) {
      // Ignored on purpose (nohup, a background shell job): the ranks inherit that and nothing is forwarded.
      continue;
    } else {
      ::sigaction(sig, &act, nullptr);
    }
    changed_[sig] = true;
  }
  signalsInstalled_ = true;
  return true;
}

void Job::restoreSignals() {
  if (!signalsInstalled_) return;
  for (int sig : kManagedSignals) {
    if (changed_[sig]) ::sigaction(sig, &oldActions_[sig], nullptr);
  }
  gSignalPipeWrite = -1;
  signalsInstalled_ = false;
}

std::vector<std::string> Job::buildEnv(int rank) const {
  int localRank = rank;
  const int node = opts_.nodes > 0 ? fakeNode(rank, opts_.nprocs, opts_.nodes) : 0;
  while (opts_.nodes > 0 && localRank > 0 && fakeNode(rank - localRank, opts_.nprocs, opts_.nodes) != node) --localRank;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"COLLIE_RANK", std::to_string(rank)},
      {"COLLIE_WORLD_SIZE", std::to_string(opts_.nprocs)},
      {"COLLIE_LOCAL_RANK", std::to_string(localRank)},
      {"COLLIE_ROOT", root_},
      {"COLLIE_SECRET", secret_},
  };
  if (opts_.nodes > 0) vars.emplace_back("COLLIE_HOSTID", "node" + std::to_string(node));
  // extraEnv comes last so an explicit -x can override what the launcher picked (a fixed COLLIE_ROOT port).
  for (const auto& kv : opts_.extraEnv) vars.push_back(kv);
  std::set<std::string> names;
  for (const auto& kv : vars) names.insert(kv.first);

  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    std::string name = eq ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (names.count(name) == 0) env.emplace_back(*e);
  }
  std::set<std::string> done;
  for (auto it = vars.rbegin(); it != vars.rend(); ++it) {
    if (done.insert(it->first).second) env.push_back(it->first + "=" + it->second);
  }
  return env;
}

bool Job::spawnAll() {
  // Signals stay blocked across fork so a child never runs the launcher's handler (which would write into the
  // launcher's self-pipe) before it has reset its dispositions.
  sigset_t block;
  sigemptyset(&block);
  for (int sig : kManagedSignals) sigaddset(&block, sig);
  ::pthread_sigmask(SIG_BLOCK, &block, nullptr);
  bool ok = true;
  for (int r = 0; r < opts_.nprocs && ok; ++r) ok = spawn(r, buildEnv(r));
  ::pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
  return ok;
}

bool Job::spawn(int rank, const std::vector<std::string>& env) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  UniqueFd outWrite;
  UniqueFd errWrite;
  if (!makePipe(&r.out.fd, &outWrite) || !makePipe(&r.err.fd, &errWrite) || !setNonBlocking(r.out.fd.get()) ||
      !setNonBlocking(r.err.fd.get())) {
    complain(std::string("cannot create pipes: ") + std::strerror(errno));
    return false;
  }
  r.out.dest = STDOUT_FILENO;
  r.err.dest = STDERR_FILENO;

  // Everything the child needs is prepared here: between fork and exec only async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (const std::string& a : opts_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) {
    complain(std::string("cannot fork rank ") + std::to_string(rank) + ": " + std::strerror(errno));
    return false;
  }
  if (pid == 0) execChild(rank, outWrite.get(), errWrite.get(), argv.data(), envp.data());
  r.pid = pid;
  r.alive = true;
  return true;
}

void Job::execChild(int rank, int outFd, int errFd, char* const* argv, char* const* envp) {
  // Stdin goes to rank 0 only, as with mpirun: N ranks reading one terminal would steal each other's input.
  if (rank != 0 && devNull_.valid()) ::dup2(devNull_.get(), STDIN_FILENO);
  if (::dup2(outFd, STDOUT_FILENO) < 0 || ::dup2(errFd, STDERR_FILENO) < 0) _exit(127);
  for (int sig : kManagedSignals) {
    if (changed_[sig]) ::sigaction(sig, &oldActions_[sig], nullptr);
  }
  ::pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
  if (fileLimitRaised_) ::setrlimit(RLIMIT_NOFILE, &oldFileLimit_);
  ::execvpe(argv[0], argv, envp);
  int err = errno;
  const char* parts[] = {kName, ": cannot run ", argv[0], ": ", std::strerror(err), "\n"};
  for (const char* p : parts) {
    ssize_t ignored = ::write(STDERR_FILENO, p, std::strlen(p));
    (void)ignored;
  }
  _exit(127);
}

bool Job::anyAlive() const {
  for (const Rank& r : ranks_) {
    if (r.alive) return true;
  }
  return false;
}

void Job::signalAlive(int sig) {
  if (sig == 0) return;
  for (const Rank& r : ranks_) {
    if (r.alive) ::kill(r.pid, sig);
  }
}

// Sends sig (none when 0) to the live ranks and arms the SIGKILL deadline; whatever asked for the stop, ranks
// that ignore it must not keep the launcher waiting forever.
void Job::startStopping(int sig) {
  signalAlive(sig);
  if (!killArmed_) {
    killArmed_ = true;
    constexpr double kMaxGraceSec = 7 * 24 * 3600.0;  // keeps the time_point arithmetic far from overflow
    double grace = opts_.killGraceSec > 0 ? std::min(opts_.killGraceSec, kMaxGraceSec) : 0.0;
    killAt_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(grace));
  }
}

void Job::handleSignalBytes() {
  unsigned char bytes[256];
  for (;;) {
    ssize_t n = ::read(sigRead_.get(), bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    for (ssize_t i = 0; i < n; ++i) {
      int sig = bytes[i] & ~kFromKernel;
      if (sig == SIGCHLD) continue;  // reap() runs after every wakeup anyway
      if (stopSignal_ == 0 && failedRank_ < 0) stopSignal_ = sig;
      // A terminal Ctrl-C already hit the ranks (same process group); sending SIGINT again would make programs
      // that treat a second Ctrl-C as "abort cleanup now" do exactly that.
      bool ranksGotIt = sig == SIGINT && (bytes[i] & kFromKernel) != 0;
      startStopping(ranksGotIt ? 0 : sig);
    }
  }
}

void Job::emit(Stream* s, const std::string& prefix, bool atEof) {
  std::string chunk;
  size_t start = 0;
  for (;;) {
    size_t nl = s->partial.find('\n', start);
    if (nl == std::string::npos) break;
    chunk += prefix;
    chunk.append(s->partial, start, nl + 1 - start);
    start = nl + 1;
  }
  s->partial.erase(0, start);
  if (!s->partial.empty() && (atEof || s->partial.size() >= kMaxPartialLine)) {
    chunk += prefix;
    chunk += s->partial;
    chunk += '\n';
    s->partial.clear();
  }
  if (chunk.empty() || writeAll(s->dest, chunk.data(), chunk.size())) return;
  // The reader went away (`collie-run ... | head`): close the ranks' ends of that stream too, so they get EPIPE
  // or SIGPIPE just as if they had written there directly, instead of running on with their output discarded.
  for (Rank& r : ranks_) {
    for (Stream* other : {&r.out, &r.err}) {
      if (other->dest == s->dest) {
        other->fd.reset();
        other->partial.clear();
      }
    }
  }
}

void Job::closeStream(Stream* s, const std::string& prefix) {
  emit(s, prefix, true);
  s->fd.reset();
}

void Job::readStream(Stream* s, const std::string& prefix, ReadMode mode) {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = ::read(s->fd.get(), buf, sizeof(buf));
    if (n > 0) {
      s->partial.append(buf, static_cast<size_t>(n));
      emit(s, prefix, false);
      if (!s->fd.valid()) return;  // its destination is gone
      // One read per wakeup keeps a chatty rank from starving the others and the signal pipe.
      if (mode == ReadMode::kOnce) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && mode != ReadMode::kDrainAndClose) return;
    closeStream(s, prefix);
    return;
  }
}

void Job::drainRank(size_t rank, ReadMode mode) {
  std::string prefix = prefixFor(rank);
  for (Stream* s : {&ranks_[rank].out, &ranks_[rank].err}) {
    if (s->fd.valid()) readStream(s, prefix, mode);
  }
}

void Job::reap() {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.alive) continue;
    int status = 0;
    pid_t got = ::waitpid(r.pid, &status, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR)) continue;
    r.alive = false;
    if (got < 0) continue;  // ECHILD: someone else reaped it; nothing to report
    int code = 0;
    std::string what;
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
      what = "exited with code " + std::to_string(code);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      what = "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    }
    if (code == 0 || failedRank_ >= 0 || stopSignal_ != 0) continue;
    // A terminal Ctrl-C hits the ranks and the launcher at once; its handler has run by now, so this decides
    // whether the rank died from that stop request rather than failing on its own.
    handleSignalBytes();
    if (stopSignal_ != 0) continue;
    // The rank's last words usually say why it failed; they belong before the launcher's verdict.
    drainRank(i, ReadMode::kDrain);
    failedRank_ = static_cast<int>(i);
    failCode_ = code;
    bool others = anyAlive();
    complain("rank " + std::to_string(i) + " " + what + (others ? "; stopping the other ranks" : ""));
    startStopping(SIGTERM);
  }
}

void Job::loop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Stream*, size_t>> owners;  // stream and rank of fds[k + 1]
  for (;;) {
    reap();
    if (!anyAlive()) break;

    fds.clear();
    owners.clear();
    fds.push_back({sigRead_.get(), POLLIN, 0});
    for (size_t i = 0; i < ranks_.size(); ++i) {
      for (Stream* s : {&ranks_[i].out, &ranks_[i].err}) {
        if (!s->fd.valid()) continue;
        fds.push_back({s->fd.get(), POLLIN, 0});
        owners.emplace_back(s, i);
      }
    }
    int timeoutMs = -1;
    if (killArmed_ && !killSent_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(killAt_ - std::chrono::steady_clock::now());
      timeoutMs = left.count() > 0 ? static_cast<int>(left.count()) + 1 : 0;
    }
    int n = ::poll(fds.data(), fds.size(), timeoutMs);
    if (n < 0 && errno != EINTR) {
      complain(std::string("poll failed: ") + std::strerror(errno));
      startStopping(SIGKILL);
      killSent_ = true;
    }
    if (n > 0) {
      if (fds[0].revents != 0) handleSignalBytes();
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        Stream* s = owners[k - 1].first;
        if (s->fd.valid()) readStream(s, prefixFor(owners[k - 1].second), ReadMode::kOnce);
      }
    }
    if (killArmed_ && !killSent_ && std::chrono::steady_clock::now() >= killAt_) {
      signalAlive(SIGKILL);
      killSent_ = true;
    }
  }

  // Everything a rank wrote before exiting is already in its pipe, so draining without blocking loses nothing;
  // waiting for EOF instead could hang on a grandchild that inherited the pipe.
  for (size_t i = 0; i < ranks_.size(); ++i) drainRank(i, ReadMode::kDrainAndClose);
}

int Job::run() {
  std::fflush(stdout);
  std::fflush(stderr);
  int port = pickFreePort();
  if (port < 0) {
    complain(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(errno));
    return 127;
  }
  root_ = "127.0.0.1:" + std::to_string(port);
  if (!makeSecret(&secret_)) {
    complain(std::string("cannot generate a secret: ") + std::strerror(errno));
    return 127;
  }
  devNull_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Two pipes per rank outgrow the usual soft limit of 1024 fds long before the 1024-rank maximum.
  const rlim_t needed = 2 * static_cast<rlim_t>(opts_.nprocs) + 64;
  if (::getrlimit(RLIMIT_NOFILE, &oldFileLimit_) == 0 && oldFileLimit_.rlim_cur < needed) {
    rlimit raised = oldFileLimit_;
    raised.rlim_cur = std::min(needed, oldFileLimit_.rlim_max);
    fileLimitRaised_ = ::setrlimit(RLIMIT_NOFILE, &raised) == 0;
  }
  if (!installSignals()) {
    complain(std::string("cannot set up signal handling: ") + std::strerror(errno));
    return 127;
  }
  if (!spawnAll()) {
    failedRank_ = 0;
    failCode_ = 127;
    startStopping(SIGTERM);
  }
  loop();
  if (failedRank_ >= 0) return failCode_;
  if (stopSignal_ != 0) return 128 + stopSignal_;
  return 0;
}

}  // namespace

int run(const Options& opts) {
  if (opts.nprocs < 1 || opts.argv.empty() || opts.argv[0].empty()) {
    complain("nothing to run (need at least one process and a program)");
    return 2;
  }
  if (opts.nodes < 0 || opts.nodes > opts.nprocs) {
    complain("cannot split " + std::to_string(opts.nprocs) + " ranks into " + std::to_string(opts.nodes) + " nodes");
    return 2;
  }
  if (gRunning.exchange(true)) {
    complain("launcher::run is already running in this process");
    return 2;
  }
  int rc = 127;
  try {
    Job job(opts);
    rc = job.run();
  } catch (const std::bad_alloc&) {
    complain("out of memory");
  } catch (...) {
    complain("unexpected internal error");
  }
  gRunning = false;
  return rc;
}

}  // namespace launcher
}  // namespace collie
