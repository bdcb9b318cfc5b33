package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;

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
    static final long WR_ID = offset(LAYOUT, "wr_id");
    static final long STATUS = offset(LAYOUT, "status");
    static final long OPCODE = offset(LAYOUT, "opcode");
    static final long VENDOR_ERR = offset(LAYOUT, "vendor_err");
    static final long BYTE_LEN = offset(LAYOUT, "byte_len");
    static final long IMM_DATA = offset(LAYOUT, "imm_data");
    static final long INVALIDATED_RKEY = offset(LAYOUT, "invalidated_rkey");
    static final long QP_NUM = offset(LAYOUT, "qp_num");
    static final long SRC_QP = offset(LAYOUT, "src_qp");
    static final long WC_FLAGS = offset(LAYOUT, "wc_flags");

    private IbvWc() {
    }
}
