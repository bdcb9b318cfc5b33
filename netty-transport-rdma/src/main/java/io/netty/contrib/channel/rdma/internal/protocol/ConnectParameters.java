package io.netty.contrib.channel.rdma.internal.protocol;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Flyweight over the connection parameters each side sends in the rdma_cm private data (the connect request
 * and the accept). All fields are big-endian. See docs/PROTOCOL.md.
 *
 * <pre>
 *  0  magic            u32  'NRDM'
 *  4  version          u16
 *  6  flags            u16  bit 0 OWN_QP; bits 8-10 pathMtu (enum ibv_mtu); the others reserved, 0
 *  8  ringAddress      u64  reserved, 0 (version 3 and earlier: a ring offered at once; rings are offered by
 *                            RING messages, docs/PROTOCOL.md §2)
 * 16  ringRkey         u32  reserved, 0
 * 20  ringSize         u32  reserved, 0
 * 24  recvCredits      u32  receive buffers posted for the peer before the first message
 * 28  recvBufferSize   u32  bytes of one receive buffer (largest SEND the peer may post)
 * </pre>
 */
public final class ConnectParameters {
    public static final int MAGIC = 0x4E52444D;
    public static final int VERSION = 5;
    /** Bounds of what a peer may announce (docs/PROTOCOL.md §1); anything else is rejected. */
    public static final int MIN_RECV_CREDITS = 2;
    public static final int MAX_RECV_CREDITS = 4096;
    public static final int MIN_RECV_BUFFER_SIZE = 64;
    public static final int MAX_RECV_BUFFER_SIZE = 1 << 20;
    public static final int MIN_RING_SIZE = 4096;
    public static final int MAX_RING_SIZE = 1 << 30;

    public static final int MAGIC_OFFSET = 0;
    public static final int VERSION_OFFSET = 4;
    public static final int FLAGS_OFFSET = 6;
    public static final int RING_ADDRESS_OFFSET = 8;
    public static final int RING_RKEY_OFFSET = 16;
    public static final int RING_SIZE_OFFSET = 20;
    public static final int RECV_CREDITS_OFFSET = 24;
    public static final int RECV_BUFFER_SIZE_OFFSET = 28;
    public static final int LENGTH = 32;
    /**
     * The sender moves its queue pair to RTR itself ({@code PATH_MTU} or {@code SERVICE_LEVEL} set), so it can
     * take another path MTU than rdma_cm's: in a request, the client's queue pair takes the server's.
     */
    public static final int FLAG_OWN_QP = 1;
    private static final int PATH_MTU_SHIFT = 8;
    private static final int PATH_MTU_MASK = 7 << PATH_MTU_SHIFT;
    private static final int KNOWN_FLAGS = FLAG_OWN_QP | PATH_MTU_MASK;

    static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private MemorySegment segment;

    public ConnectParameters wrap(MemorySegment segment) {
        if (segment.byteSize() < LENGTH) {
            throw new IllegalArgumentException("connect parameters need " + LENGTH + " bytes, got " + segment.byteSize());
        }
        this.segment = segment;
        return this;
    }

    /**
     * Parses and checks the connect parameters a peer sent as private data.
     *
     * @throws ProtocolException naming what is wrong, with the reason to reject the peer with
     */
    public static ConnectParameters parse(byte[] data) {
        if (data.length < LENGTH) {
            throw new ProtocolException("peer sent " + data.length + " bytes of connect parameters, expected "
                    + LENGTH + ": not a netty-transport-rdma peer");
        }
        return new ConnectParameters().wrap(MemorySegment.ofArray(data)).validate(data.length);
    }

    /** Writes magic, the current version and zero flags. */
    public ConnectParameters writeHeader() {
        segment.set(U32, MAGIC_OFFSET, MAGIC);
        segment.set(U16, VERSION_OFFSET, (short) VERSION);
        segment.set(U16, FLAGS_OFFSET, (short) 0);
        return this;
    }

    /**
     * Checks magic and version of parameters received from a peer.
     *
     * @throws ProtocolException naming what the peer sent
     */
    public ConnectParameters validate(int length) {
        if (length < LENGTH) {
            throw new ProtocolException("peer sent " + length + " bytes of connect parameters, expected at least "
                    + LENGTH + ": not a netty-transport-rdma peer");
        }
        if (magic() != MAGIC) {
            throw new ProtocolException(String.format(
                    "peer sent connect parameters with magic 0x%08x, expected 0x%08x: not a netty-transport-rdma peer",
                    magic(), MAGIC));
        }
        if (version() != VERSION) {
            throw new ProtocolException("peer speaks protocol version " + version() + ", this side speaks "
                    + VERSION, RejectReason.REASON_VERSION_MISMATCH);
        }
        String invalid = invalidField();
        if (invalid != null) {
            throw new ProtocolException("peer sent invalid connect parameters (" + invalid + "): " + this);
        }
        return this;
    }

    /** What is out of its documented range, or {@code null}. */
    private String invalidField() {
        if ((flags() & ~KNOWN_FLAGS) != 0) {
            return "reserved flags " + (flags() & ~KNOWN_FLAGS) + " are not 0";
        }
        if (pathMtu() > 5 || pathMtu() != 0 && !ownQueuePair()) {
            return "pathMtu " + pathMtu() + " is neither 0 nor 1-5 (256-4096 bytes) with OWN_QP";
        }
        int credits = recvCredits();
        if (credits < MIN_RECV_CREDITS || credits > MAX_RECV_CREDITS) {
            return "recvCredits " + Integer.toUnsignedString(credits) + " outside " + MIN_RECV_CREDITS + "-"
                    + MAX_RECV_CREDITS;
        }
        int slot = recvBufferSize();
        if (slot < MIN_RECV_BUFFER_SIZE || slot > MAX_RECV_BUFFER_SIZE) {
            return "recvBufferSize " + Integer.toUnsignedString(slot) + " outside " + MIN_RECV_BUFFER_SIZE + "-"
                    + MAX_RECV_BUFFER_SIZE;
        }
        if (ringAddress() != 0 || ringRkey() != 0 || ringSize() != 0) {
            return "a ring in the connect parameters (ringAddress 0x" + Long.toHexString(ringAddress())
                    + ", ringSize " + Integer.toUnsignedString(ringSize()) + "): rings are offered by RING messages";
        }
        return null;
    }

    public int magic() {
        return segment.get(U32, MAGIC_OFFSET);
    }

    public int version() {
        return Short.toUnsignedInt(segment.get(U16, VERSION_OFFSET));
    }

    public int flags() {
        return Short.toUnsignedInt(segment.get(U16, FLAGS_OFFSET));
    }

    /** Whether the sender drives its own queue pair's RTR ({@link #FLAG_OWN_QP}). */
    public boolean ownQueuePair() {
        return (flags() & FLAG_OWN_QP) != 0;
    }

    /**
     * The path MTU ({@code enum ibv_mtu}, 1 = 256 ... 5 = 4096 bytes; 0 none): in a request the client's cap, in an
     * accept the path MTU of the server's queue pair, which the client's must match (IBA C9-92).
     */
    public int pathMtu() {
        return (flags() & PATH_MTU_MASK) >>> PATH_MTU_SHIFT;
    }

    /** Sets {@link #FLAG_OWN_QP} and {@link #pathMtu()} (0-5; only with {@code ownQueuePair}). */
    public ConnectParameters queuePair(boolean ownQueuePair, int pathMtu) {
        if (pathMtu < 0 || pathMtu > 5 || pathMtu != 0 && !ownQueuePair) {
            throw new IllegalArgumentException("pathMtu: " + pathMtu + " (expected: 0-5, non-zero with its own"
                    + " queue pair)");
        }
        segment.set(U16, FLAGS_OFFSET, (short) ((ownQueuePair ? FLAG_OWN_QP : 0) | pathMtu << PATH_MTU_SHIFT));
        return this;
    }

    public long ringAddress() {
        return segment.get(U64, RING_ADDRESS_OFFSET);
    }

    public ConnectParameters ringAddress(long value) {
        segment.set(U64, RING_ADDRESS_OFFSET, value);
        return this;
    }

    public int ringRkey() {
        return segment.get(U32, RING_RKEY_OFFSET);
    }

    public ConnectParameters ringRkey(int value) {
        segment.set(U32, RING_RKEY_OFFSET, value);
        return this;
    }

    public int ringSize() {
        return segment.get(U32, RING_SIZE_OFFSET);
    }

    public ConnectParameters ringSize(int value) {
        segment.set(U32, RING_SIZE_OFFSET, value);
        return this;
    }

    /** Sets the reserved flags (tests of what a peer may send). */
    ConnectParameters segmentFlags(int value) {
        segment.set(U16, FLAGS_OFFSET, (short) value);
        return this;
    }

    public int recvCredits() {
        return segment.get(U32, RECV_CREDITS_OFFSET);
    }

    public ConnectParameters recvCredits(int value) {
        segment.set(U32, RECV_CREDITS_OFFSET, value);
        return this;
    }

    public int recvBufferSize() {
        return segment.get(U32, RECV_BUFFER_SIZE_OFFSET);
    }

    public ConnectParameters recvBufferSize(int value) {
        segment.set(U32, RECV_BUFFER_SIZE_OFFSET, value);
        return this;
    }

    @Override
    public String toString() {
        return String.format("ConnectParameters{magic=0x%08x, version=%d, flags=%d, ringAddress=0x%x, ringRkey=0x%x,"
                        + " ringSize=%d, recvCredits=%d, recvBufferSize=%d}",
                magic(), version(), flags(), ringAddress(), ringRkey(), ringSize(), recvCredits(), recvBufferSize());
    }
}
