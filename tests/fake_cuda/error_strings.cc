// cudaGetErrorString and cudaGetErrorName of the fake CUDA runtime: CUDA 13.0's own texts for every
// code of cudaError_t (taken from libcudart), so logs read as they would on a GPU.
#include <cuda_runtime_api.h>

namespace {

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

#define COLLIE_FAKE_ERROR(code, text) \
  { code, #code, text }

const ErrorText kErrors[] = {
    COLLIE_FAKE_ERROR(cudaSuccess, "no error"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidValue, "invalid argument"),
    COLLIE_FAKE_ERROR(cudaErrorMemoryAllocation, "out of memory"),
    COLLIE_FAKE_ERROR(cudaErrorInitializationError, "initialization error"),
    COLLIE_FAKE_ERROR(cudaErrorCudartUnloading, "driver shutting down"),
    COLLIE_FAKE_ERROR(cudaErrorProfilerDisabled, "profiler disabled while using external profiling tool"),
    COLLIE_FAKE_ERROR(cudaErrorProfilerNotInitialized, "profiler not initialized: call cudaProfilerInitialize()"),
    COLLIE_FAKE_ERROR(cudaErrorProfilerAlreadyStarted, "profiler already started"),
    COLLIE_FAKE_ERROR(cudaErrorProfilerAlreadyStopped, "profiler already stopped"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidSymbol, "invalid device symbol"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidHostPointer, "invalid host pointer"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidTexture, "invalid texture reference"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidTextureBinding, "texture is not bound to a pointer"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    COLLIE_FAKE_ERROR(cudaErrorAddressOfConstant, "invalid address of constant"),
    COLLIE_FAKE_ERROR(cudaErrorTextureFetchFailed, "fetch from texture failed"),
    COLLIE_FAKE_ERROR(cudaErrorTextureNotBound, "cannot fetch from a texture that is not bound"),
    COLLIE_FAKE_ERROR(cudaErrorSynchronizationError, "incorrect use of __syncthreads()"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidFilterSetting, "linear filtering not supported for non-float type"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidNormSetting, "read as normalized float not supported for data type"),
    COLLIE_FAKE_ERROR(cudaErrorMixedDeviceExecution, "device emulation mode and device execution mode cannot be mixed"),
    COLLIE_FAKE_ERROR(cudaErrorNotYetImplemented, "feature not yet implemented"),
    COLLIE_FAKE_ERROR(cudaErrorMemoryValueTooLarge, "memory size or pointer value too large to fit in 32 bit"),
    COLLIE_FAKE_ERROR(cudaErrorStubLibrary, "CUDA driver is a stub library"),
    COLLIE_FAKE_ERROR(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    COLLIE_FAKE_ERROR(cudaErrorCallRequiresNewerDriver, "API call is not supported in the installed CUDA driver"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidSurface, "invalid surface reference"),
    COLLIE_FAKE_ERROR(cudaErrorDuplicateVariableName, "duplicate global variable looked up by string name"),
    COLLIE_FAKE_ERROR(cudaErrorDuplicateTextureName, "duplicate texture looked up by string name"),
    COLLIE_FAKE_ERROR(cudaErrorDuplicateSurfaceName, "duplicate surface looked up by string name"),
    COLLIE_FAKE_ERROR(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable"),
    COLLIE_FAKE_ERROR(cudaErrorIncompatibleDriverContext, "incompatible driver context"),
    COLLIE_FAKE_ERROR(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
    COLLIE_FAKE_ERROR(cudaErrorPriorLaunchFailure, "unspecified launch failure in prior launch"),
    COLLIE_FAKE_ERROR(cudaErrorLaunchMaxDepthExceeded, "launch would exceed maximum depth of nested launches"),
    COLLIE_FAKE_ERROR(
        cudaErrorLaunchFileScopedTex,
        "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)"),
    COLLIE_FAKE_ERROR(
        cudaErrorLaunchFileScopedSurf,
        "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)"),
    COLLIE_FAKE_ERROR(cudaErrorSyncDepthExceeded,
                      "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth"),
    COLLIE_FAKE_ERROR(cudaErrorLaunchPendingCountExceeded,
                      "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidDeviceFunction, "invalid device function"),
    COLLIE_FAKE_ERROR(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidDevice, "invalid device ordinal"),
    COLLIE_FAKE_ERROR(cudaErrorDeviceNotLicensed, "device doesn't have valid Grid license"),
    COLLIE_FAKE_ERROR(cudaErrorSoftwareValidityNotEstablished, "integrity checks failed"),
    COLLIE_FAKE_ERROR(cudaErrorStartupFailure, "startup failure in cuda runtime"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    COLLIE_FAKE_ERROR(cudaErrorDeviceUninitialized, "invalid device context"),
    COLLIE_FAKE_ERROR(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed"),
    COLLIE_FAKE_ERROR(cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed"),
    COLLIE_FAKE_ERROR(cudaErrorArrayIsMapped, "array is mapped"),
    COLLIE_FAKE_ERROR(cudaErrorAlreadyMapped, "resource already mapped"),
    COLLIE_FAKE_ERROR(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device"),
    COLLIE_FAKE_ERROR(cudaErrorAlreadyAcquired, "resource already acquired"),
    COLLIE_FAKE_ERROR(cudaErrorNotMapped, "resource not mapped"),
    COLLIE_FAKE_ERROR(cudaErrorNotMappedAsArray, "resource not mapped as array"),
    COLLIE_FAKE_ERROR(cudaErrorNotMappedAsPointer, "resource not mapped as pointer"),
    COLLIE_FAKE_ERROR(cudaErrorECCUncorrectable, "uncorrectable ECC error encountered"),
    COLLIE_FAKE_ERROR(cudaErrorUnsupportedLimit, "limit is not supported on this architecture"),
    COLLIE_FAKE_ERROR(cudaErrorDeviceAlreadyInUse, "exclusive-thread device already in use by a different thread"),
    COLLIE_FAKE_ERROR(cudaErrorPeerAccessUnsupported, "peer access is not supported between these two devices"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidPtx, "a PTX JIT compilation failed"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidGraphicsContext, "invalid OpenGL or DirectX context"),
    COLLIE_FAKE_ERROR(cudaErrorNvlinkUncorrectable, "uncorrectable NVLink error detected during the execution"),
    COLLIE_FAKE_ERROR(cudaErrorJitCompilerNotFound, "PTX JIT compiler library not found"),
    COLLIE_FAKE_ERROR(cudaErrorUnsupportedPtxVersion, "the provided PTX was compiled with an unsupported toolchain."),
    COLLIE_FAKE_ERROR(cudaErrorJitCompilationDisabled, "PTX JIT compilation was disabled"),
    COLLIE_FAKE_ERROR(cudaErrorUnsupportedExecAffinity, "the provided execution affinity is not supported"),
    COLLIE_FAKE_ERROR(cudaErrorUnsupportedDevSideSync,
                      "the provided PTX contains unsupported call to cudaDeviceSynchronize"),
    COLLIE_FAKE_ERROR(cudaErrorContained, "Invalid access of peer GPU memory over nvlink or a hardware error"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidSource, "device kernel image is invalid"),
    COLLIE_FAKE_ERROR(cudaErrorFileNotFound, "file not found"),
    COLLIE_FAKE_ERROR(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
    COLLIE_FAKE_ERROR(cudaErrorSharedObjectInitFailed, "shared object initialization failed"),
    COLLIE_FAKE_ERROR(cudaErrorOperatingSystem, "OS call failed or operation not supported on this OS"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    COLLIE_FAKE_ERROR(cudaErrorIllegalState, "the operation cannot be performed in the present state"),
    COLLIE_FAKE_ERROR(cudaErrorLossyQuery, "attempted introspection would be semantically lossy"),
    COLLIE_FAKE_ERROR(cudaErrorSymbolNotFound, "named symbol not found"),
    COLLIE_FAKE_ERROR(cudaErrorNotReady, "device not ready"),
    COLLIE_FAKE_ERROR(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    COLLIE_FAKE_ERROR(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    COLLIE_FAKE_ERROR(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    COLLIE_FAKE_ERROR(cudaErrorLaunchIncompatibleTexturing, "launch uses incompatible texturing mode"),
    COLLIE_FAKE_ERROR(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    COLLIE_FAKE_ERROR(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    COLLIE_FAKE_ERROR(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process"),
    COLLIE_FAKE_ERROR(cudaErrorContextIsDestroyed, "context is destroyed"),
    COLLIE_FAKE_ERROR(cudaErrorAssert, "device-side assert triggered"),
    COLLIE_FAKE_ERROR(cudaErrorTooManyPeers, "peer mapping resources exhausted"),
    COLLIE_FAKE_ERROR(cudaErrorHostMemoryAlreadyRegistered,
                      "part or all of the requested memory range is already mapped"),
    COLLIE_FAKE_ERROR(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
    COLLIE_FAKE_ERROR(cudaErrorHardwareStackError, "hardware stack error"),
    COLLIE_FAKE_ERROR(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
    COLLIE_FAKE_ERROR(cudaErrorMisalignedAddress, "misaligned address"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidPc, "invalid program counter"),
    COLLIE_FAKE_ERROR(cudaErrorLaunchFailure, "unspecified launch failure"),
    COLLIE_FAKE_ERROR(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    COLLIE_FAKE_ERROR(cudaErrorTensorMemoryLeak, "tensor memory not completely freed"),
    COLLIE_FAKE_ERROR(cudaErrorNotPermitted, "operation not permitted"),
    COLLIE_FAKE_ERROR(cudaErrorNotSupported, "operation not supported"),
    COLLIE_FAKE_ERROR(cudaErrorSystemNotReady, "system not yet initialized"),
    COLLIE_FAKE_ERROR(cudaErrorSystemDriverMismatch, "system has unsupported display driver / cuda driver combination"),
    COLLIE_FAKE_ERROR(cudaErrorCompatNotSupportedOnDevice, "forward compatibility was attempted on non supported HW"),
    COLLIE_FAKE_ERROR(cudaErrorMpsConnectionFailed,
                      "MPS client failed to connect to the MPS control daemon or the MPS server"),
    COLLIE_FAKE_ERROR(cudaErrorMpsRpcFailure,
                      "the remote procedural call between the MPS server and the MPS client failed"),
    COLLIE_FAKE_ERROR(cudaErrorMpsServerNotReady, "MPS server is not ready to accept new MPS client requests"),
    COLLIE_FAKE_ERROR(cudaErrorMpsMaxClientsReached,
                      "the hardware resources required to create MPS client have been exhausted"),
    COLLIE_FAKE_ERROR(cudaErrorMpsMaxConnectionsReached,
                      "the hardware resources required to support device connections have been exhausted"),
    COLLIE_FAKE_ERROR(cudaErrorMpsClientTerminated, "the MPS client has been terminated by the server"),
    COLLIE_FAKE_ERROR(
        cudaErrorCdpNotSupported,
        "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"),
    COLLIE_FAKE_ERROR(cudaErrorCdpVersionMismatch,
                      "unsupported interaction between different versions of CUDA Dynamic Parallelism"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureMerge, "operation would result in a merge of separate capture sequences"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureImplicit,
                      "operation would make the legacy stream depend on a capturing blocking stream"),
    COLLIE_FAKE_ERROR(cudaErrorCapturedEvent,
                      "operation not permitted on an event last recorded in a capturing stream"),
    COLLIE_FAKE_ERROR(cudaErrorStreamCaptureWrongThread,
                      "attempt to terminate a thread-local capture sequence from another thread"),
    COLLIE_FAKE_ERROR(cudaErrorTimeout, "wait operation timed out"),
    COLLIE_FAKE_ERROR(cudaErrorGraphExecUpdateFailure,
                      "the graph update was not performed because it included changes which violated constraints "
                      "specific to instantiated graph update"),
    COLLIE_FAKE_ERROR(cudaErrorExternalDevice, "an async error has occured in external entity outside of CUDA"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidClusterSize,
                      "a kernel launch error has occurred due to cluster misconfiguration"),
    COLLIE_FAKE_ERROR(cudaErrorFunctionNotLoaded,
                      "the function handle is not loaded when calling an API that requires a loaded function"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidResourceType,
                      "one or more resources passed in are not valid resource types for the operation"),
    COLLIE_FAKE_ERROR(cudaErrorInvalidResourceConfiguration,
                      "one or more resources are insufficient or non-applicable for the operation"),
    COLLIE_FAKE_ERROR(cudaErrorUnknown, "unknown error"),
};

#undef COLLIE_FAKE_ERROR

const ErrorText* find(cudaError_t e) {
  for (const ErrorText& t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}

}  // namespace

extern "C" {

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  const ErrorText* t = find(error);
  return t != nullptr ? t->text : "unrecognized error code";
}

const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  const ErrorText* t = find(error);
  return t != nullptr ? t->name : "unrecognized error code";
}

}  // extern "C"
