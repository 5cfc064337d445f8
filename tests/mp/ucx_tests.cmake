# Ranks split into fake nodes (collie-run --nodes K): peers on other nodes go
# over UCX, on loopback only: UCX_TLS=sm,self or tcp on lo. Included by
# tests/CMakeLists.txt when COLLIE_WITH_UCX is on.
set(COLLIE_UCX_SM "UCX_TLS=sm,self")
set(COLLIE_UCX_TCP "UCX_TLS=tcp;UCX_NET_DEVICES=lo")

# ucx_mp(name nodes ranks env args...): collectives_mp under collie-run --nodes.
function(ucx_mp name nodes ranks env)
  add_test(NAME ${name} COMMAND collie-run --nodes ${nodes} -np ${ranks} $<TARGET_FILE:collectives_mp> ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS mp TIMEOUT 120 ENVIRONMENT "${env};COLLIE_TIMEOUT=60")
endfunction()

# Every collective, alltoallv and grouped send/recv, full sizes on 2x2.
ucx_mp(ucx_mp_2x2_sm 2 4 "${COLLIE_UCX_SM}")
ucx_mp(ucx_mp_2x2_tcp 2 4 "${COLLIE_UCX_TCP}")
ucx_mp(ucx_mp_3x2_sm 3 6 "${COLLIE_UCX_SM}" --quick)
ucx_mp(ucx_mp_3x2_tcp 3 6 "${COLLIE_UCX_TCP}" --quick)
ucx_mp(ucx_mp_4x1_sm 4 4 "${COLLIE_UCX_SM}" --quick)
ucx_mp(ucx_mp_4x1_tcp 4 4 "${COLLIE_UCX_TCP}" --quick)
# Algorithms other than the tuner's, and tiny slots over 3 channels (slot reuse, wrap-around, the channel split).
ucx_mp(ucx_mp_3x2_tcp_trees 3 6
  "${COLLIE_UCX_TCP};COLLIE_ALGO=allreduce:tree,reducescatter:halving,allgather:bruck,broadcast:binomial,reduce:binomial,gather:binomial,scatter:binomial"
  --quick)
ucx_mp(ucx_mp_4x1_sm_rhd 4 4
  "${COLLIE_UCX_SM};COLLIE_ALGO=allreduce:rhd,reducescatter:ring,broadcast:chain,reduce:chain,gather:linear,scatter:linear"
  --quick)
# Hierarchical allreduce over real node layouts: many rounds of tiny slots on 2x2; 3x2 over tcp; nodes of
# unequal size (3 + 2), where every rank counts as its own node and hier runs as a flat ring.
ucx_mp(ucx_mp_2x2_sm_hier 2 4 "${COLLIE_UCX_SM};COLLIE_TEST_TYPES=sizes;COLLIE_ALGO=allreduce:hier,broadcast:hier,reduce:hier;COLLIE_SLOT_BYTES=4096;COLLIE_SLOTS=2")
ucx_mp(ucx_mp_3x2_tcp_hier 3 6 "${COLLIE_UCX_TCP};COLLIE_ALGO=allreduce:hier,broadcast:hier,reduce:hier" --quick)
ucx_mp(ucx_mp_uneven_sm_hier 2 5 "${COLLIE_UCX_SM};COLLIE_ALGO=allreduce:hier,broadcast:hier,reduce:hier" --quick)
ucx_mp(ucx_mp_3x2_sm_tiny_slots 3 5 "${COLLIE_UCX_SM};COLLIE_SLOT_BYTES=4096;COLLIE_SLOTS=2;COLLIE_CHANNELS=3" --quick)
# The runs below that take another path than the plain ones above sweep one type per element size
# (COLLIE_TEST_TYPES=sizes, tests/common/test_util.h): the path moves bytes, the arithmetic is the same.
# The staged path GPU communicators take across hosts, with memcpy standing in for the copies (COLLIE_TEST_STAGE_HOST).
ucx_mp(ucx_mp_2x2_sm_staged 2 4 "${COLLIE_UCX_SM};COLLIE_TEST_STAGE_HOST=1;COLLIE_TEST_TYPES=sizes")
# The proxy path GPU kernels take across hosts, driven by the host executor (COLLIE_TEST_PROXY_HOST): every
# collective on 2x2; tiny slots over 3 channels on uneven nodes over tcp (slot reuse, slices of every size).
ucx_mp(ucx_mp_2x2_sm_proxy 2 4 "${COLLIE_UCX_SM};COLLIE_TEST_PROXY_HOST=1;COLLIE_TEST_TYPES=sizes")
ucx_mp(ucx_mp_3x2_tcp_proxy_tiny 3 5
  "${COLLIE_UCX_TCP};COLLIE_TEST_PROXY_HOST=1;COLLIE_SLOT_BYTES=4096;COLLIE_SLOTS=2;COLLIE_CHANNELS=3" --quick)
# The same with ranks as threads of one process cut into 2 fake nodes (COLLIE_FAKE_NODES), where TSan can see the
# proxy thread: every algorithm on 3 ranks and with tiny slots; send/recv and all-to-all-v split over 3 channels.
add_test(NAME algorithms_proxy COMMAND algorithms_api_test --gtest_brief=1 --gtest_filter=*_n3:*tinyslots*)
add_test(NAME p2p_proxy COMMAND p2p_test --gtest_brief=1)
set_tests_properties(algorithms_proxy PROPERTIES LABELS "unit;rerun" TIMEOUT 300
  ENVIRONMENT "${COLLIE_UCX_SM};COLLIE_FAKE_NODES=2;COLLIE_TEST_PROXY_HOST=1;COLLIE_TIMEOUT=60;COLLIE_TEST_TYPES=sizes")
set_tests_properties(p2p_proxy PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT
  "${COLLIE_UCX_SM};COLLIE_FAKE_NODES=2;COLLIE_TEST_PROXY_HOST=1;COLLIE_TIMEOUT=60;COLLIE_CHANNELS=3;COLLIE_SLOT_BYTES=4096;COLLIE_SLOTS=2")

# The kernels' own code on the CPU (COLLIE_TEST_EMULATE_KERNELS) through the proxy, as a GPU communicator with
# COLLIE_GPU_REMOTE=proxy runs it: every collective on 2x2 processes; send/recv and all-to-all-v over 3 channels of
# tiny slots with ranks as threads cut into 2 fake nodes.
ucx_mp(ucx_mp_2x2_sm_emulated 2 4 "${COLLIE_UCX_SM};COLLIE_TEST_EMULATE_KERNELS=3;COLLIE_TEST_TYPES=sizes")
add_test(NAME p2p_emulated_proxy COMMAND p2p_test --gtest_brief=1)
set_tests_properties(p2p_emulated_proxy PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT
  "${COLLIE_UCX_SM};COLLIE_FAKE_NODES=2;COLLIE_TEST_EMULATE_KERNELS=3;COLLIE_TIMEOUT=60;COLLIE_CHANNELS=3;COLLIE_SLOT_BYTES=4096;COLLIE_SLOTS=2")

# A rank killed mid-collective: survivors fail within COLLIE_TIMEOUT, over tcp
# (UCX detects the dead peer) and sm (no detection in UCX 1.13: the timeout).
add_executable(ucx_kill_mp mp/ucx_kill_mp.cc)
target_link_libraries(ucx_kill_mp PRIVATE collie collie_warnings)
add_test(NAME ucx_kill_rank_tcp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mp/ucx_kill_test.sh
  $<TARGET_FILE:ucx_kill_mp> tcp 2 4 1 detects)
add_test(NAME ucx_kill_rank_sm COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mp/ucx_kill_test.sh
  $<TARGET_FILE:ucx_kill_mp> sm,self 2 4 2)
# The same over tcp through the proxy: the proxy marks the peer lost, and the waits on it fail.
add_test(NAME ucx_kill_rank_tcp_proxy COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mp/ucx_kill_test.sh
  $<TARGET_FILE:ucx_kill_mp> tcp 2 4 1 detects)
set_tests_properties(ucx_kill_rank_tcp ucx_kill_rank_sm PROPERTIES LABELS mp TIMEOUT 90 ENVIRONMENT COLLIE_TIMEOUT=8)
set_tests_properties(ucx_kill_rank_tcp_proxy PROPERTIES LABELS mp TIMEOUT 90
  ENVIRONMENT "COLLIE_TIMEOUT=8;COLLIE_TEST_PROXY_HOST=1")
# And with the kernels' own code on the CPU (COLLIE_TEST_EMULATE_KERNELS) behind the proxy: a wait inside the emulated
# kernel sees the lost flag, and the error carries the proxy's reason.
add_test(NAME ucx_kill_rank_tcp_emulated COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mp/ucx_kill_test.sh
  $<TARGET_FILE:ucx_kill_mp> tcp 2 4 1 detects)
set_tests_properties(ucx_kill_rank_tcp_emulated PROPERTIES LABELS mp TIMEOUT 90
  ENVIRONMENT "COLLIE_TIMEOUT=8;COLLIE_TEST_EMULATE_KERNELS=3")

# Two fake hosts with different addresses (network namespaces joined by a veth pair), 2 ranks each over UCX tcp.
# Needs root and iproute2; skips elsewhere.
add_test(NAME ucx_netns_2x2_tcp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mp/netns_test.sh $<TARGET_FILE:collectives_mp>)
set_tests_properties(ucx_netns_2x2_tcp PROPERTIES LABELS mp TIMEOUT 180 SKIP_RETURN_CODE 77)
