package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct rdma_cm_event}; {@code param.conn} is a {@code struct rdma_conn_param}, {@code param.ud} a {@code struct rdma_ud_param}. */
final class RdmaCmEvent {
    static final GroupLayout LAYOUT = struct("rdma_cm_event",
            POINTER.withName("id"),
            POINTER.withName("listen_id"),
            U32.withName("event"),
            U32.withName("status"),
            union("rdma_cm_event_param",
                    RdmaConnParam.LAYOUT.withName("conn"),
                    struct("rdma_ud_param",
                            POINTER.withName("private_data"),
                            U8.withName("private_data_len"),
                            IbvAhAttr.LAYOUT.withName("ah_attr"),
                            U32.withName("qp_num"),
                            U32.withName("qkey")).withName("ud")).withName("param"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle ID = field(LAYOUT, "id");
    static final VarHandle LISTEN_ID = field(LAYOUT, "listen_id");
    static final VarHandle EVENT = field(LAYOUT, "event");
    static final VarHandle STATUS = field(LAYOUT, "status");
    static final VarHandle PARAM_CONN_PRIVATE_DATA = field(LAYOUT, "param.conn.private_data");
    static final VarHandle PARAM_CONN_PRIVATE_DATA_LEN = field(LAYOUT, "param.conn.private_data_len");
    static final VarHandle PARAM_CONN_RESPONDER_RESOURCES = field(LAYOUT, "param.conn.responder_resources");
    static final VarHandle PARAM_CONN_INITIATOR_DEPTH = field(LAYOUT, "param.conn.initiator_depth");
    static final VarHandle PARAM_CONN_QP_NUM = field(LAYOUT, "param.conn.qp_num");

    private RdmaCmEvent() {
    }
}
