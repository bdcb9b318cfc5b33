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
            return "connection rejected by the peer (it gave no netty-transport-rdma reason: is it a netty-transport-rdma"
                    + " server?)";
        }
        return switch (reason()) {
            case REASON_VERSION_MISMATCH -> "connection rejected: the peer speaks protocol version " + version()
                    + ", this side speaks " + ConnectParameters.VERSION;
            case REASON_INVALID_PARAMETERS -> "connection rejected: the peer found our connect parameters invalid";
            case REASON_NO_RESOURCES -> "connection rejected: the peer has no resources for another connection";
            case REASON_NOT_ACCEPTING -> "connection rejected: the peer is not accepting connections";
            default -> "connection rejected by the peer (reason " + reason() + ')';
        };
    }

    @Override
    public String toString() {
        return String.format("RejectReason{magic=0x%08x, version=%d, reason=%d}", magic(), version(), reason());
    }
}
