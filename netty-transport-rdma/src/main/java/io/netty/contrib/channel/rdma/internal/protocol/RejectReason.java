package io.netty.contrib.channel.rdma.internal.protocol;

import java.lang.foreign.MemorySegment;

import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U16;
import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U32;

/**
 * Flyweight over the private data of an rdma_cm reject, so the rejected side can say why. Big-endian.
 *
 * <pre>
 *  0  magic    u32  'NRDM'
 *  4  version  u16  the protocol version the rejecting side speaks
 *  6  reason   u16  one of the REASON_ constants
 * </pre>
 */
public final class RejectReason {
    public static final int REASON_VERSION_MISMATCH = 1;
    public static final int REASON_INVALID_PARAMETERS = 2;
    public static final int REASON_NO_RESOURCES = 3;
    public static final int REASON_NOT_ACCEPTING = 4;
    /** The server caps the path MTU below the one the client's queue pair, driven by rdma_cm, runs at. */
    public static final int REASON_PATH_MTU = 5;

    /**
     * The status of an RDMA_CM_EVENT_REJECTED on InfiniBand and RoCE is the IB CM's reject reason
     * (enum ib_cm_rej_reason, IBTA vol. 1 table 112); the peer's application rejecting is "consumer defined".
     */
    public static final int CM_REJ_CONSUMER_DEFINED = 28;

    public static final int MAGIC_OFFSET = 0;
    public static final int VERSION_OFFSET = 4;
    public static final int REASON_OFFSET = 6;
    public static final int LENGTH = 8;

    private MemorySegment segment;

    public RejectReason wrap(MemorySegment segment) {
        if (segment.byteSize() < LENGTH) {
            throw new IllegalArgumentException("reject reason needs " + LENGTH + " bytes, got " + segment.byteSize());
        }
        this.segment = segment;
        return this;
    }

    public RejectReason write(int reason) {
        segment.set(U32, MAGIC_OFFSET, ConnectParameters.MAGIC);
        segment.set(U16, VERSION_OFFSET, (short) ConnectParameters.VERSION);
        segment.set(U16, REASON_OFFSET, (short) reason);
        return this;
    }

    /** The private data of a reject for {@code reason}. */
    public static byte[] encode(int reason) {
        byte[] data = new byte[LENGTH];
        new RejectReason().wrap(MemorySegment.ofArray(data)).write(reason);
        return data;
    }

    public int magic() {
        return segment.get(U32, MAGIC_OFFSET);
    }

    public int version() {
        return Short.toUnsignedInt(segment.get(U16, VERSION_OFFSET));
    }

    public int reason() {
        return Short.toUnsignedInt(segment.get(U16, REASON_OFFSET));
    }

    /**
     * What the local side should report when the peer rejected it with {@code length} bytes of private data
     * wrapped by this flyweight.
     */
    public String describe(int length) {
        if (length < LENGTH || magic() != ConnectParameters.MAGIC) {
            return "connection rejected by the peer without a netty-transport-rdma reason (IB CM reject reason 28,"
                    + " consumer-defined: not a netty-transport-rdma server, or its rdma_cm could not hand the request"
                    + " to a listener)";
        }
        return switch (reason()) {
            case REASON_VERSION_MISMATCH -> "connection rejected: the peer speaks protocol version " + version()
                    + ", this side speaks " + ConnectParameters.VERSION;
            case REASON_INVALID_PARAMETERS -> "connection rejected: the peer found our connect parameters invalid";
            case REASON_NO_RESOURCES -> "connection rejected: the peer has no resources for another connection";
            case REASON_NOT_ACCEPTING -> "connection rejected: the peer is not accepting connections";
            case REASON_PATH_MTU -> "connection rejected: the peer caps the path MTU below the one rdma_cm gives this"
                    + " side's queue pair; set RdmaChannelOption.PATH_MTU here too (the peer's cap or above), so this"
                    + " side moves its queue pair to RTR itself and takes the peer's MTU";
            default -> "connection rejected by the peer (reason " + reason() + ')';
        };
    }

    /**
     * Why the connection manager (not the peer's application) rejected a connection: the status of the
     * RDMA_CM_EVENT_REJECTED, an IB CM reject reason.
     */
    public static String describeCmReason(int status) {
        String name = switch (status) {
            case 1 -> "no QP available";
            case 2 -> "no EEC available";
            case 3 -> "no resources";
            case 4 -> "timeout";
            case 5 -> "unsupported request";
            case 6 -> "invalid communication id";
            case 7 -> "invalid communication instance";
            case 8 -> "invalid service id: nothing listens there";
            case 9 -> "invalid transport type";
            case 10 -> "stale connection: the peer still holds a connection from this side's QP number (time wait)";
            case 11 -> "RDC does not exist";
            case 12 -> "invalid GID";
            case 13 -> "invalid LID";
            case 14 -> "invalid SL";
            case 15 -> "invalid traffic class";
            case 16 -> "invalid hop limit";
            case 17 -> "invalid packet rate";
            case 18, 19, 20, 21, 22, 23, 24, 25 -> "invalid alternate path";
            case 26 -> "port redirect";
            case 27 -> "invalid MTU";
            case 28 -> "rejected by the peer's application";
            case 29 -> "invalid RNR retry";
            case 30 -> "duplicate local communication id";
            case 31 -> "unsupported class version";
            case 32, 33 -> "invalid flow label";
            default -> "unknown reason";
        };
        return "rejected by the peer's connection manager: " + name + " (IB CM reject reason " + status + ")";
    }

    @Override
    public String toString() {
        return String.format("RejectReason{magic=0x%08x, version=%d, reason=%d}", magic(), version(), reason());
    }
}
