package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * An rdma_cm event ({@code struct rdma_cm_event}), copied when received. It must be acknowledged with
 * {@link #ack()} (= {@link #close()}); until then its id cannot be destroyed ({@code rdma_destroy_id} would wait).
 */
public final class CmEvent extends NativeObject {
    private final int type;
    private final int status;
    private final CmId id;
    private final CmId listenId;
    private final byte[] privateData;
    private final int responderResources;
    private final int initiatorDepth;
    private final int qpNum;

    CmEvent(MemorySegment event, int type, CmId id, CmId listenId) {
        super("CmEvent", event, id, listenId);
        this.type = type;
        this.status = (int) RdmaCmEvent.STATUS.get(event, 0L);
        this.id = id;
        this.listenId = listenId;
        MemorySegment data = (MemorySegment) RdmaCmEvent.PARAM_CONN_PRIVATE_DATA.get(event, 0L);
        int length = Byte.toUnsignedInt((byte) RdmaCmEvent.PARAM_CONN_PRIVATE_DATA_LEN.get(event, 0L));
        this.privateData = data.address() == 0 || !carriesConnParam(type) ? new byte[0]
                : data.reinterpret(length).toArray(JAVA_BYTE);
        this.responderResources = Byte.toUnsignedInt((byte) RdmaCmEvent.PARAM_CONN_RESPONDER_RESOURCES.get(event, 0L));
        this.initiatorDepth = Byte.toUnsignedInt((byte) RdmaCmEvent.PARAM_CONN_INITIATOR_DEPTH.get(event, 0L));
        this.qpNum = (int) RdmaCmEvent.PARAM_CONN_QP_NUM.get(event, 0L);
    }

    private static boolean carriesConnParam(int type) {
        return type == CmEventType.CONNECT_REQUEST || type == CmEventType.CONNECT_RESPONSE
                || type == CmEventType.ESTABLISHED || type == CmEventType.REJECTED;
    }

    /** {@link CmEventType}. */
    public int type() {
        return type;
    }

    /** The library's name of the type ({@code rdma_event_str}), e.g. "RDMA_CM_EVENT_ESTABLISHED". */
    public String typeString() {
        try {
            return ((MemorySegment) LibRdmacm.RDMA_EVENT_STR.invokeExact(type)).reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** 0, a negative errno (e.g. {@code ADDR_ERROR}), or the reject reason of {@code REJECTED}. */
    public int status() {
        return status;
    }

    /** The id the event is about; for {@code CONNECT_REQUEST} the new id of the incoming connection. */
    public CmId id() {
        return id;
    }

    /** The listening id of a {@code CONNECT_REQUEST}, else {@code null}. */
    public CmId listenId() {
        return listenId;
    }

    /** A copy of the peer's private data (connect request, accept, reject), or an empty array. */
    public byte[] privateData() {
        return privateData.clone();
    }

    public int responderResources() {
        return responderResources;
    }

    public int initiatorDepth() {
        return initiatorDepth;
    }

    /** The peer's QP number, where the transport reports it. */
    public int qpNum() {
        return qpNum;
    }

    /** {@code rdma_ack_cm_event}; the copied values stay readable. Idempotent. */
    public void ack() {
        close();
    }

    @Override
    void destroy() {
        CmEventChannel.ack(pointer);
    }

    @Override
    public String toString() {
        return "CmEvent[" + CmEventType.name(type) + ", status " + status + ", private data "
                + privateData.length + " bytes]";
    }
}
