package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_qp_init_attr}: argument of {@code ibv_create_qp}/{@code rdma_create_qp}; the device writes the granted caps back. */
final class IbvQpInitAttr {
    static final GroupLayout LAYOUT = struct("ibv_qp_init_attr",
            POINTER.withName("qp_context"),
            POINTER.withName("send_cq"),
            POINTER.withName("recv_cq"),
            POINTER.withName("srq"),
            IbvQpCap.LAYOUT.withName("cap"),
            U32.withName("qp_type"),
            U32.withName("sq_sig_all"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle SEND_CQ = field(LAYOUT, "send_cq");
    static final VarHandle RECV_CQ = field(LAYOUT, "recv_cq");
    static final VarHandle SRQ = field(LAYOUT, "srq");
    static final VarHandle CAP_MAX_SEND_WR = field(LAYOUT, "cap.max_send_wr");
    static final VarHandle CAP_MAX_RECV_WR = field(LAYOUT, "cap.max_recv_wr");
    static final VarHandle CAP_MAX_SEND_SGE = field(LAYOUT, "cap.max_send_sge");
    static final VarHandle CAP_MAX_RECV_SGE = field(LAYOUT, "cap.max_recv_sge");
    static final VarHandle CAP_MAX_INLINE_DATA = field(LAYOUT, "cap.max_inline_data");
    static final VarHandle QP_TYPE = field(LAYOUT, "qp_type");
    static final VarHandle SQ_SIG_ALL = field(LAYOUT, "sq_sig_all");

    private IbvQpInitAttr() {
    }
}
