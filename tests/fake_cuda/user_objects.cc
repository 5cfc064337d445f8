// The fake CUDA runtime's user objects: a reference-counted pointer and
// destructor that a graph may own (cudaGraphRetainUserObject), so that a
// library learns when a graph it was captured into is gone. A graph's
// references live in its GraphMem, shared by the graph, its executable graphs
// and their queued launches, so the destructor runs once all of them are
// gone, as CUDA's does. CUDA runs destructors on a thread of its own; here
// they run where the last reference drops, which is just as forbidden a place
// for a CUDA call.
#include <atomic>

#include "internal.h"

namespace fakecuda {
namespace detail {

struct UserObject {
  void* ptr = nullptr;
  cudaHostFn_t destroy = nullptr;
  std::atomic<unsigned> refs{0};
};

void releaseUserObject(UserObject* u, unsigned count) {
  if (u->refs.fetch_sub(count) != count) return;
  u->destroy(u->ptr);
  delete u;
}

namespace {

cudaError_t create(cudaUserObject_t* out, void* ptr, cudaHostFn_t destroy, unsigned refs, unsigned flags) {
  if (out == nullptr || destroy == nullptr || refs == 0 || flags != cudaUserObjectNoDestructorSync)
    return cudaErrorInvalidValue;
  auto* u = new UserObject;
  u->ptr = ptr;
  u->destroy = destroy;
  u->refs = refs;
  *out = reinterpret_cast<cudaUserObject_t>(u);
  return cudaSuccess;
}

cudaError_t release(cudaUserObject_t object, unsigned count) {
  auto* u = reinterpret_cast<UserObject*>(object);
  if (u == nullptr || count == 0 || count > u->refs.load()) return cudaErrorInvalidValue;
  releaseUserObject(u, count);
  return cudaSuccess;
}

// `graph` is a graph, or the one a capture is building (cudaStreamGetCaptureInfo names it by its capture).
cudaError_t retainInGraph(cudaGraph_t graph, cudaUserObject_t object, unsigned count, unsigned flags) {
  auto* u = reinterpret_cast<UserObject*>(object);
  if (u == nullptr || count == 0 || (flags != 0 && flags != cudaGraphUserObjectMove)) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<GraphMem> mem;
  auto it = st.graphs.find(graph);
  if (it != st.graphs.end()) mem = it->second->mem;
  for (const std::shared_ptr<Capture>& c : st.captures)
    if (reinterpret_cast<cudaGraph_t>(c.get()) == graph) mem = c->mem;
  if (!mem) return cudaErrorInvalidValue;
  if (flags == cudaGraphUserObjectMove) {
    if (count > u->refs.load()) return cudaErrorInvalidValue;  // more than the caller holds
  } else {
    u->refs += count;
  }
  mem->users.insert(mem->users.end(), count, u);
  return cudaSuccess;
}

}  // namespace
}  // namespace detail
}  // namespace fakecuda

using namespace fakecuda::detail;

extern "C" {

cudaError_t CUDARTAPI cudaUserObjectCreate(cudaUserObject_t* object, void* ptr, cudaHostFn_t destroy,
                                           unsigned int initialRefcount, unsigned int flags) {
  return report(create(object, ptr, destroy, initialRefcount, flags));
}

cudaError_t CUDARTAPI cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  return report(release(object, count));
}

cudaError_t CUDARTAPI cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                                unsigned int flags) {
  return report(retainInGraph(graph, object, count, flags));
}

}  // extern "C"
