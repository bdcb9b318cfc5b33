package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/**
 * {@code struct ibv_send_wr}: a send work request ({@code imm_data} is big-endian: the handle takes host values;
 * {@code invalidate_rkey}, sharing its bytes, is host order). {@code imm_data}/{@code invalidate_rkey} and
 * {@code bind_mw} are members of anonymous unions, named as in C.
 */
final class IbvSendWr {
    static final GroupLayout LAYOUT = struct("ibv_send_wr",
            U64.withName("wr_id"),
            POINTER_BITS.withName("next"),
            POINTER_BITS.withName("sg_list"),
            U32.withName("num_sge"),
            U32.withName("opcode"),
            U32.withName("send_flags"),
            anonymousUnion(
                    BE32.withName("imm_data"),
                    U32.withName("invalidate_rkey")),
            union("ibv_send_wr_wr",
                    struct("ibv_send_wr_rdma",
                            U64.withName("remote_addr"),
                            U32.withName("rkey")).withName("rdma"),
                    struct("ibv_send_wr_atomic",
                            U64.withName("remote_addr"),
                            U64.withName("compare_add"),
                            U64.withName("swap"),
                            U32.withName("rkey")).withName("atomic")).withName("wr"),
            union("ibv_send_wr_qp_type",
                    struct("ibv_send_wr_xrc",
                            U32.withName("remote_srqn")).withName("xrc")).withName("qp_type"),
            anonymousUnion(
                    struct("ibv_send_wr_bind_mw",
                            POINTER_BITS.withName("mw"),
                            U32.withName("rkey"),
                            IbvMwBindInfo.LAYOUT.withName("bind_info")).withName("bind_mw")));
    static final long SIZE = LAYOUT.byteSize();
    static final long WR_ID = offset(LAYOUT, "wr_id");
    static final long NEXT = offset(LAYOUT, "next");
    static final long SG_LIST = offset(LAYOUT, "sg_list");
    static final long NUM_SGE = offset(LAYOUT, "num_sge");
    static final long OPCODE = offset(LAYOUT, "opcode");
    static final long SEND_FLAGS = offset(LAYOUT, "send_flags");
    static final long IMM_DATA = offset(LAYOUT, "imm_data");
    static final long INVALIDATE_RKEY = offset(LAYOUT, "invalidate_rkey");
    static final long WR_RDMA_REMOTE_ADDR = offset(LAYOUT, "wr.rdma.remote_addr");
    static final long WR_RDMA_RKEY = offset(LAYOUT, "wr.rdma.rkey");
    static final long WR_ATOMIC_REMOTE_ADDR = offset(LAYOUT, "wr.atomic.remote_addr");
    static final long WR_ATOMIC_COMPARE_ADD = offset(LAYOUT, "wr.atomic.compare_add");
    static final long WR_ATOMIC_SWAP = offset(LAYOUT, "wr.atomic.swap");
    static final long WR_ATOMIC_RKEY = offset(LAYOUT, "wr.atomic.rkey");
    static final long BIND_MW_MW = offset(LAYOUT, "bind_mw.mw");
    static final long BIND_MW_RKEY = offset(LAYOUT, "bind_mw.rkey");
    static final long BIND_MW_MR = offset(LAYOUT, "bind_mw.bind_info.mr");
    static final long BIND_MW_ADDR = offset(LAYOUT, "bind_mw.bind_info.addr");
    static final long BIND_MW_LENGTH = offset(LAYOUT, "bind_mw.bind_info.length");
    static final long BIND_MW_ACCESS_FLAGS = offset(LAYOUT, "bind_mw.bind_info.mw_access_flags");

    private IbvSendWr() {
    }
}
