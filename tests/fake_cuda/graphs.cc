// Stream capture and graphs of the fake CUDA runtime.
//
// A capture records each operation issued to its streams as a node whose dependencies are the
// stream's previous node(s), plus the nodes an event stood for when a cudaStreamWaitEvent joined
// them. Events recorded in a capture make no node: they name the recording stream's current nodes,
// and a stream that waits on one joins the capture (a fork); the origin waiting on an event of a
// joined stream is the join. cudaStreamEndCapture checks that every node is an ancestor of the
// origin's last nodes (cudaErrorStreamCaptureUnjoined otherwise) and returns the nodes in the order
// they were issued, which is a topological order of the graph. A launch runs them one after the
// other on the launch stream: a graph's branches never run concurrently here. External event nodes
// (cudaEventRecordExternal, cudaEventWaitExternal) act when the launch is made: a wait takes the
// event's latest record at that moment, a record makes the event stand for that point of the launch.
//
// The rules CUDA enforces around captures (cudaThreadExchangeStreamCaptureMode's "potentially
// unsafe" calls, the legacy stream's implicit dependency on capturing blocking streams, captured
// events) live here too; the calls they guard invoke the checks.
#include <algorithm>

#include "internal.h"

namespace fakecuda {
namespace detail {

void invalidate(Capture& c) { c.invalidated = true; }

cudaError_t legacyCaptureCheck(State& st, const Stream& s) {
  if (!s.isDefault) return cudaSuccess;
  bool hit = false;
  for (const std::shared_ptr<Capture>& c : st.captures)
    for (const std::shared_ptr<Stream>& m : c->members)
      if (m->device == s.device && m->blocking()) {
        invalidate(*c);
        hit = true;
      }
  return hit ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

cudaError_t unsafeCallCheck(State& st) {
  const cudaStreamCaptureMode mode = self().mode;
  if (mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  const std::thread::id me = std::this_thread::get_id();
  bool hit = false;
  for (const std::shared_ptr<Capture>& c : st.captures) {
    const bool mine = c->thread == me && c->mode != cudaStreamCaptureModeRelaxed;
    const bool global =
        mode == cudaStreamCaptureModeGlobal && c->thread != me && c->mode == cudaStreamCaptureModeGlobal;
    if (mine || global) {
      invalidate(*c);
      hit = true;
    }
  }
  return hit ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t recordNode(State&, Stream& s, Node& node) {
  Capture& c = *s.capture;
  if (c.invalidated) return cudaErrorStreamCaptureInvalidated;
  node.deps = s.tail;
  c.nodes.push_back(std::move(node));
  s.tail = {c.nodes.size() - 1};
  return cudaSuccess;
}

cudaError_t recordNode(State& st, Stream& s, Work& work) {
  if (s.capture->invalidated) return cudaErrorStreamCaptureInvalidated;
  Node node;
  node.work = std::move(work);
  return recordNode(st, s, node);
}

}  // namespace detail
}  // namespace fakecuda

using namespace fakecuda::detail;
using fakecuda::Work;

namespace {

bool validMode(cudaStreamCaptureMode m) {
  return m == cudaStreamCaptureModeGlobal || m == cudaStreamCaptureModeThreadLocal || m == cudaStreamCaptureModeRelaxed;
}

cudaError_t beginCapture(cudaStream_t handle, cudaStreamCaptureMode mode) {
  if (!validMode(mode)) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  if (isLegacyHandle(handle)) return cudaErrorStreamCaptureUnsupported;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (s->capture) return cudaErrorIllegalState;
  auto c = std::make_shared<Capture>();
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->device = s->device;
  c->origin = s;
  c->members = {s};
  s->capture = c;
  s->tail.clear();
  st.captures.push_back(c);
  return cudaSuccess;
}

// True when every node is the origin's last node or one of its ancestors.
bool joined(const std::vector<Node>& nodes, const std::vector<size_t>& originTail) {
  std::vector<char> seen(nodes.size(), 0);
  std::vector<size_t> todo = originTail;
  size_t count = 0;
  while (!todo.empty()) {
    const size_t n = todo.back();
    todo.pop_back();
    if (seen[n]) continue;
    seen[n] = 1;
    ++count;
    todo.insert(todo.end(), nodes[n].deps.begin(), nodes[n].deps.end());
  }
  return count == nodes.size();
}

cudaError_t endCapture(cudaStream_t handle, cudaGraph_t* out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  std::vector<Node> nodes;  // destroyed after the mutex is released (user closures)
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  std::shared_ptr<Capture> c = s->capture;
  if (!c) return cudaErrorIllegalState;
  if (c->origin != s) {
    invalidate(*c);
    return cudaErrorStreamCaptureUnmatched;
  }
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return cudaErrorStreamCaptureWrongThread;
  const std::vector<size_t> originTail = s->tail;
  for (const std::shared_ptr<Stream>& m : c->members) {
    m->capture.reset();
    m->tail.clear();
  }
  c->members.clear();
  c->origin.reset();
  c->ended = true;
  st.captures.erase(std::remove(st.captures.begin(), st.captures.end(), c), st.captures.end());
  nodes = std::move(c->nodes);
  *out = nullptr;
  if (c->invalidated) return cudaErrorStreamCaptureInvalidated;
  if (!joined(nodes, originTail)) return cudaErrorStreamCaptureUnjoined;
  auto g = std::make_shared<Graph>();
  g->nodes = std::move(nodes);
  g->mem = c->mem;
  st.graphs[g.get()] = g;
  *out = reinterpret_cast<cudaGraph_t>(g.get());
  return cudaSuccess;
}

// cudaStreamIsCapturing, and cudaStreamGetCaptureInfo's status, id and graph: the graph being built is named by
// its capture, which cudaGraphRetainUserObject accepts (user_objects.cc).
cudaError_t captureInfo(cudaStream_t handle, cudaStreamCaptureStatus* status, unsigned long long* id = nullptr,
                        cudaGraph_t* graph = nullptr) {
  if (status == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (s->isDefault) {
    // The legacy stream is unusable while a blocking stream of its device captures (the capture is
    // not invalidated by the query).
    for (const std::shared_ptr<Capture>& c : st.captures)
      for (const std::shared_ptr<Stream>& m : c->members)
        if (m->device == s->device && m->blocking()) return cudaErrorStreamCaptureImplicit;
  }
  if (!s->capture) {
    *status = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  *status = s->capture->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  if (id != nullptr) *id = reinterpret_cast<uintptr_t>(s->capture.get());
  if (graph != nullptr) *graph = reinterpret_cast<cudaGraph_t>(s->capture.get());
  return cudaSuccess;
}

cudaError_t exchangeCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr || !validMode(*mode)) return cudaErrorInvalidValue;
  std::swap(self().mode, *mode);
  return cudaSuccess;
}

cudaError_t waitEventInCapture(Stream& s, Event& ev) {
  Capture& c = *s.capture;
  if (c.invalidated) return cudaErrorStreamCaptureInvalidated;
  if (ev.captured) {
    if (ev.capture == s.capture) {
      for (size_t n : ev.capturedTail)
        if (std::find(s.tail.begin(), s.tail.end(), n) == s.tail.end()) s.tail.push_back(n);
      return cudaSuccess;
    }
    invalidate(c);
    if (!ev.capture->ended) {
      invalidate(*ev.capture);
      return cudaErrorStreamCaptureMerge;
    }
    return cudaErrorStreamCaptureIsolation;
  }
  if (!ev.record.stream) return cudaSuccess;  // never recorded: waits for nothing
  // Work outside the capture cannot be a dependency of the graph (cudaEventWaitExternal aside).
  invalidate(c);
  return cudaErrorStreamCaptureIsolation;
}

cudaError_t streamWaitEvent(cudaStream_t handle, cudaEvent_t event, unsigned int flags) {
  if (flags != cudaEventWaitDefault && flags != cudaEventWaitExternal) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  auto it = st.events.find(event);
  if (it == st.events.end()) return cudaErrorInvalidResourceHandle;
  Event& ev = *it->second;
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (s->capture) {
    if (flags != cudaEventWaitExternal) return waitEventInCapture(*s, ev);
    Node node;  // waits, at each launch, for the event's latest record then
    node.kind = Node::kWait;
    node.event = it->second;
    return recordNode(st, *s, node);
  }
  if (ev.captured) {
    Capture& c = *ev.capture;
    if (c.ended) return cudaErrorCapturedEvent;
    if (c.invalidated) return cudaErrorInvalidValue;
    if (s->isDefault) return cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot be captured
    // The stream joins the capture: its next operations depend on the event's nodes.
    s->capture = ev.capture;
    s->tail = ev.capturedTail;
    c.members.push_back(s);
    return cudaSuccess;
  }
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (!ev.record.stream) return cudaSuccess;
  Item item;
  item.deps.push_back(ev.record);
  push(st, s, std::move(item));
  return cudaSuccess;
}

constexpr unsigned long long kInstantiateFlags = cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                                 cudaGraphInstantiateFlagUpload | cudaGraphInstantiateFlagDeviceLaunch |
                                                 cudaGraphInstantiateFlagUseNodePriority;

cudaError_t graphInstantiate(cudaGraphExec_t* out, cudaGraph_t graph, unsigned long long flags) {
  if (out == nullptr || (flags & ~kInstantiateFlags) != 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  auto it = st.graphs.find(graph);
  if (it == st.graphs.end()) return cudaErrorInvalidValue;
  auto x = std::make_shared<GraphExec>();
  x->nodes = it->second->nodes;
  x->mem = it->second->mem;
  st.execs[x.get()] = x;
  *out = reinterpret_cast<cudaGraphExec_t>(x.get());
  return cudaSuccess;
}

cudaError_t graphLaunch(cudaGraphExec_t exec, cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  std::vector<Node> nodes;  // destroyed after the mutex is released (user closures)
  State& st = state();
  auto lock = lockState();
  auto it = st.execs.find(exec);
  if (it == st.execs.end()) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<GraphExec> x = it->second;
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  nodes = x->nodes;
  if (s->capture) {
    // Launched inside a capture: the graph's nodes become nodes of the new graph (a child graph).
    if (s->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    for (Node& n : nodes) {
      if (n.kind == Node::kWork) n.work = [w = std::move(n.work), k = x->mem] { return w(); };
      (void)recordNode(st, *s, n);
    }
    return cudaSuccess;
  }
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (const cudaError_t e = deviceState(st, s->device).sticky) return e;
  // External event nodes act as the launch is made: a wait takes the event's latest record now, a
  // record makes the event stand for this point of the launch.
  std::vector<Dep> waits;
  if (x->last.stream) waits.push_back(x->last);
  for (Node& n : nodes) {
    std::shared_ptr<Event> ev = n.event.lock();
    if (n.kind == Node::kWait) {
      if (ev && !ev->captured && ev->record.stream) waits.push_back(ev->record);
      continue;
    }
    if (n.kind == Node::kRecord && !ev) continue;
    Item item;
    item.work = std::move(n.work);
    item.deps = std::move(waits);
    waits.clear();
    item.keepAlive = x->mem;
    if (n.kind == Node::kRecord) item.marker = std::make_shared<Marker>();
    std::shared_ptr<Marker> marker = item.marker;
    const uint64_t ticket = push(st, s, std::move(item));
    if (n.kind == Node::kRecord) {
      ev->record = {s, ticket};
      ev->marker = marker;
      ev->captured = false;
      ev->capture.reset();
      ev->capturedTail.clear();
    }
  }
  Item last;  // carries the waits left over; the next launch of this graph is ordered after it
  last.deps = std::move(waits);
  x->last = {s, push(st, s, std::move(last))};
  return cudaSuccess;
}

// Erases a handle and returns what it held, so that the caller drops it after unlocking.
template <typename T>
cudaError_t take(std::unordered_map<const void*, std::shared_ptr<T>>& map, const void* handle,
                 std::shared_ptr<T>* out) {
  auto it = map.find(handle);
  if (it == map.end()) return cudaErrorInvalidValue;
  *out = std::move(it->second);
  map.erase(it);
  return cudaSuccess;
}

cudaError_t graphExecDestroy(cudaGraphExec_t exec) {
  if (const cudaError_t e = begin()) return e;
  std::shared_ptr<GraphExec> x;
  auto lock = lockState();
  return take(state().execs, exec, &x);
}

cudaError_t graphDestroy(cudaGraph_t graph) {
  if (const cudaError_t e = begin()) return e;
  std::shared_ptr<Graph> g;
  auto lock = lockState();
  return take(state().graphs, graph, &g);
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return report(beginCapture(stream, mode));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return report(endCapture(stream, graph));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return report(captureInfo(stream, status));
}

// The dependency nodes are not modelled (no node handles): asking for them is refused.
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                               unsigned long long* id, cudaGraph_t* graph,
                                               const cudaGraphNode_t** dependencies, const cudaGraphEdgeData** edges,
                                               size_t* numDependencies) {
  if (dependencies != nullptr || edges != nullptr || numDependencies != nullptr) return report(cudaErrorNotSupported);
  return report(captureInfo(stream, status, id, graph));
}

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  return report(exchangeCaptureMode(mode));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return report(streamWaitEvent(stream, event, flags));
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return report(graphInstantiate(exec, graph, flags));
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return report(graphLaunch(exec, stream));
}

cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t exec) { return report(graphExecDestroy(exec)); }

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) { return report(graphDestroy(graph)); }

}  // extern "C"
