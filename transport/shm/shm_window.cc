#include "transport/shm/shm_window.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>

#include "base/hash.h"
#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"

namespace collie {

namespace {

// The mappings of the segments this process created and has not unlinked, by name (ShmSegment says why).
struct Registry {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<void>> byName;
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: segments may outlive static destruction
  return *r;
}

}  // namespace

ShmSegment::Mapping::~Mapping() { munmap(addr, size); }

ShmSegment::~ShmSegment() { reset(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    map_ = std::move(other.map_);
    name_ = std::move(other.name_);
    owner_ = other.owner_;
    other.owner_ = false;
  }
  return *this;
}

void ShmSegment::reset() {
  if (owner_) (void)unlink();
  map_.reset();  // unmapped here if no other rank of the process holds it
}

Status ShmSegment::create(const std::string& name, size_t bytes, ShmSegment* out) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return systemError(("shm_open(create " + name + ")").c_str(), errno, __FILE__, __LINE__);
  ShmSegment seg;
  seg.name_ = name;
  seg.owner_ = true;  // from here on, the destructor unlinks on failure
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    return systemError(("ftruncate(" + name + ")").c_str(), err, __FILE__, __LINE__);
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (addr == MAP_FAILED) return systemError(("mmap(" + name + ")").c_str(), err, __FILE__, __LINE__);
  seg.map_ = std::make_shared<Mapping>(addr, bytes);
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().byName[name] = seg.map_;
  }
  *out = std::move(seg);
  return Status();
}

Status ShmSegment::open(const std::string& name, size_t bytes, ShmSegment* out) {
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    const auto it = registry().byName.find(name);
    std::shared_ptr<Mapping> ours =
        it != registry().byName.end() ? std::static_pointer_cast<Mapping>(it->second.lock()) : nullptr;
    if (ours != nullptr) {
      if (ours->size != bytes)
        return Status::error(collieInternalError, "shm segment %s has %zu bytes, expected %zu", name.c_str(),
                             ours->size, bytes);
      ShmSegment seg;
      seg.map_ = std::move(ours);
      seg.name_ = name;
      *out = std::move(seg);
      return Status();
    }
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return systemError(("shm_open(" + name + ")").c_str(), errno, __FILE__, __LINE__);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return Status::error(collieInternalError, "shm segment %s has %lld bytes, expected %zu", name.c_str(),
                         static_cast<long long>(st.st_size), bytes);
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (addr == MAP_FAILED) return systemError(("mmap(" + name + ")").c_str(), err, __FILE__, __LINE__);
  ShmSegment seg;
  seg.map_ = std::make_shared<Mapping>(addr, bytes);
  seg.name_ = name;
  *out = std::move(seg);
  return Status();
}

Status ShmSegment::unlink() {
  if (!owner_) return Status();
  owner_ = false;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().byName.erase(name_);
  }
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT)
    return systemError(("shm_unlink(" + name_ + ")").c_str(), errno, __FILE__, __LINE__);
  return Status();
}

namespace {

std::string segmentName(uint64_t tag, int rank) {
  char name[64];
  snprintf(name, sizeof(name), "/collie-%016llx-%d", static_cast<unsigned long long>(tag), rank);
  return name;
}

}  // namespace

Status ShmWindows::create(Bootstrap* bootstrap, size_t bytes, std::unique_ptr<ShmWindows>* out,
                          const std::vector<bool>& map) {
  const int rank = bootstrap->rank(), n = bootstrap->nranks();
  // A nonce from rank 0 keeps two communicators made from the same secret (an
  // environment init repeated in one job) from colliding in /dev/shm.
  uint64_t nonce = 0;
  if (rank == 0) {
    Secret r;
    COLLIE_RETURN_IF_ERROR(randomSecret(&r));
    nonce = fnv1a(r.bytes, sizeof(r.bytes));
  }
  COLLIE_RETURN_IF_ERROR(bootstrap->broadcast(&nonce, sizeof(nonce), 0));
  const uint64_t tag =
      fnv1a(&nonce, sizeof(nonce), fnv1a(bootstrap->secret().bytes, sizeof(bootstrap->secret().bytes)));

  auto windows = std::unique_ptr<ShmWindows>(new ShmWindows());
  windows->bytes_ = bytes;
  windows->segments_.resize(static_cast<size_t>(n));
  Status created = ShmSegment::create(segmentName(tag, rank), bytes, &windows->segments_[static_cast<size_t>(rank)]);
  // Everyone learns whether everyone succeeded, so no rank waits for a window that will never exist.
  std::vector<uint8_t> ok(static_cast<size_t>(n));
  ok[static_cast<size_t>(rank)] = created.ok() ? 1 : 0;
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(ok.data(), 1));
  if (!created.ok()) return created;
  for (int r = 0; r < n; ++r)
    if (!ok[static_cast<size_t>(r)])
      return Status::error(collieRemoteError, "rank %d could not create its shared-memory window", r);

  Status mapped;
  for (int r = 0; r < n && mapped.ok(); ++r)
    if (r != rank && (map.empty() || map[static_cast<size_t>(r)]))
      mapped = ShmSegment::open(segmentName(tag, r), bytes, &windows->segments_[static_cast<size_t>(r)]);
  ok[static_cast<size_t>(rank)] = mapped.ok() ? 1 : 0;
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(ok.data(), 1));
  // All peers have mapped our window (or given up): the name is no longer needed.
  COLLIE_RETURN_IF_ERROR(windows->segments_[static_cast<size_t>(rank)].unlink());
  if (!mapped.ok()) return mapped;
  for (int r = 0; r < n; ++r)
    if (!ok[static_cast<size_t>(r)])
      return Status::error(collieRemoteError, "rank %d could not map the shared-memory windows of its peers", r);
  COLLIE_INFO("shm windows mapped: %d ranks x %zu bytes", n, bytes);
  *out = std::move(windows);
  return Status();
}

}  // namespace collie
