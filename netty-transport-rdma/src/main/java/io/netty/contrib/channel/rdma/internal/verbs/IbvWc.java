package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/**
 * {@code struct ibv_wc}: a work completion ({@code imm_data} is big-endian: the handle returns host values;
 * {@code invalidated_rkey}, in an anonymous union with it, is host order).
 */
final class IbvWc {
    static final GroupLayout LAYOUT = struct("ibv_wc",
            U64.withName("wr_id"),
            U32.withName("status"),
            U32.withName("opcode"),
            U32.withName("vendor_err"),
            U32.withName("byte_len"),
            anonymousUnion(
                    BE32.withName("imm_data"),
                    U32.withName("invalidated_rkey")),
            U32.withName("qp_num"),
            U32.withName("src_qp"),
            U32.withName("wc_flags"),
            U16.withName("pkey_index"),
            U16.withName("slid"),
            U8.withName("sl"),
            U8.withName("dlid_path_bits"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle WR_ID = field(LAYOUT, "wr_id");
    static final VarHandle STATUS = field(LAYOUT, "status");
    static final VarHandle OPCODE = field(LAYOUT, "opcode");
    static final VarHandle VENDOR_ERR = field(LAYOUT, "vendor_err");
    static final VarHandle BYTE_LEN = field(LAYOUT, "byte_len");
    static final VarHandle IMM_DATA = field(LAYOUT, "imm_data");
    static final VarHandle INVALIDATED_RKEY = field(LAYOUT, "invalidated_rkey");
    static final VarHandle QP_NUM = field(LAYOUT, "qp_num");
    static final VarHandle SRC_QP = field(LAYOUT, "src_qp");
    static final VarHandle WC_FLAGS = field(LAYOUT, "wc_flags");

    private IbvWc() {
    }
}
