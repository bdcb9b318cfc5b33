package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct rdma_conn_param}: argument of {@code rdma_connect}/{@code rdma_accept}, and the {@code param.conn} of an event. */
final class RdmaConnParam {
    static final GroupLayout LAYOUT = struct("rdma_conn_param",
            POINTER.withName("private_data"),
            U8.withName("private_data_len"),
            U8.withName("responder_resources"),
            U8.withName("initiator_depth"),
            U8.withName("flow_control"),
            U8.withName("retry_count"),
            U8.withName("rnr_retry_count"),
            U8.withName("srq"),
            U32.withName("qp_num"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle PRIVATE_DATA = field(LAYOUT, "private_data");
    static final VarHandle PRIVATE_DATA_LEN = field(LAYOUT, "private_data_len");
    static final VarHandle RESPONDER_RESOURCES = field(LAYOUT, "responder_resources");
    static final VarHandle INITIATOR_DEPTH = field(LAYOUT, "initiator_depth");
    static final VarHandle FLOW_CONTROL = field(LAYOUT, "flow_control");
    static final VarHandle RETRY_COUNT = field(LAYOUT, "retry_count");
    static final VarHandle RNR_RETRY_COUNT = field(LAYOUT, "rnr_retry_count");
    static final VarHandle SRQ = field(LAYOUT, "srq");
    static final VarHandle QP_NUM = field(LAYOUT, "qp_num");

    private RdmaConnParam() {
    }
}
