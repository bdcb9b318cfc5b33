package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_async_event}: filled by {@code ibv_get_async_event}. */
final class IbvAsyncEvent {
    static final GroupLayout LAYOUT = struct("ibv_async_event",
            union("ibv_async_event_element",
                    POINTER.withName("cq"),
                    POINTER.withName("qp"),
                    POINTER.withName("srq"),
                    U32.withName("port_num")).withName("element"),
            U32.withName("event_type"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle ELEMENT_QP = field(LAYOUT, "element.qp");
    static final VarHandle ELEMENT_PORT_NUM = field(LAYOUT, "element.port_num");
    static final VarHandle EVENT_TYPE = field(LAYOUT, "event_type");

    private IbvAsyncEvent() {
    }
}
