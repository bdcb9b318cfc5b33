package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

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
    static final VarHandle WR_ID = field(LAYOUT, "wr_id");
    static final VarHandle NEXT = field(LAYOUT, "next");
    static final VarHandle SG_LIST = field(LAYOUT, "sg_list");
    static final VarHandle NUM_SGE = field(LAYOUT, "num_sge");
    static final VarHandle OPCODE = field(LAYOUT, "opcode");
    static final VarHandle SEND_FLAGS = field(LAYOUT, "send_flags");
    static final VarHandle IMM_DATA = field(LAYOUT, "imm_data");
    static final VarHandle INVALIDATE_RKEY = field(LAYOUT, "invalidate_rkey");
    static final VarHandle WR_RDMA_REMOTE_ADDR = field(LAYOUT, "wr.rdma.remote_addr");
    static final VarHandle WR_RDMA_RKEY = field(LAYOUT, "wr.rdma.rkey");
    static final VarHandle WR_ATOMIC_REMOTE_ADDR = field(LAYOUT, "wr.atomic.remote_addr");
    static final VarHandle WR_ATOMIC_COMPARE_ADD = field(LAYOUT, "wr.atomic.compare_add");
    static final VarHandle WR_ATOMIC_SWAP = field(LAYOUT, "wr.atomic.swap");
    static final VarHandle WR_ATOMIC_RKEY = field(LAYOUT, "wr.atomic.rkey");
    static final VarHandle BIND_MW_MW = field(LAYOUT, "bind_mw.mw");
    static final VarHandle BIND_MW_RKEY = field(LAYOUT, "bind_mw.rkey");
    static final VarHandle BIND_MW_MR = field(LAYOUT, "bind_mw.bind_info.mr");
    static final VarHandle BIND_MW_ADDR = field(LAYOUT, "bind_mw.bind_info.addr");
    static final VarHandle BIND_MW_LENGTH = field(LAYOUT, "bind_mw.bind_info.length");
    static final VarHandle BIND_MW_ACCESS_FLAGS = field(LAYOUT, "bind_mw.bind_info.mw_access_flags");

    private IbvSendWr() {
    }
}
