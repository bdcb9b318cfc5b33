package io.netty.contrib.channel.rdma.internal.protocol;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConnectParametersTest {
    @Test
    void roundTripsEveryFieldInBigEndian() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(ConnectParameters.LENGTH);
            new ConnectParameters().wrap(segment).writeHeader()
                    .ringAddress(0x1122_3344_5566_7788L).ringRkey(0xCAFEBABE).ringSize(1 << 20)
                    .recvCredits(64).recvBufferSize(8192);

            byte[] bytes = segment.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            assertThat(bytes).startsWith('N', 'R', 'D', 'M', 0, 3, 0, 0, 0x11, 0x22);

            ConnectParameters read = new ConnectParameters().wrap(segment).validate(ConnectParameters.LENGTH);
            assertThat(read.ringAddress()).isEqualTo(0x1122_3344_5566_7788L);
            assertThat(read.ringRkey()).isEqualTo(0xCAFEBABE);
            assertThat(read.ringSize()).isEqualTo(1 << 20);
            assertThat(read.recvCredits()).isEqualTo(64);
            assertThat(read.recvBufferSize()).isEqualTo(8192);
            assertThat(read.toString()).contains("ringRkey=0xcafebabe", "recvCredits=64");
        }
    }

    @Test
    void rejectsOtherVersionsAndForeignPeers() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(ConnectParameters.LENGTH);
            ConnectParameters params = new ConnectParameters().wrap(segment).writeHeader().recvCredits(4)
                    .recvBufferSize(1024);
            segment.set(ConnectParameters.U16, ConnectParameters.VERSION_OFFSET, (short) 7);
            assertThatThrownBy(() -> params.validate(ConnectParameters.LENGTH))
                    .isInstanceOf(ProtocolException.class)
                    .hasMessage("peer speaks protocol version 7, this side speaks 3")
                    .extracting(e -> ((ProtocolException) e).rejectReason())
                    .isEqualTo(RejectReason.REASON_VERSION_MISMATCH);

            assertThatThrownBy(() -> params.validate(10)).hasMessageContaining("not a netty-transport-rdma peer");
            segment.set(ConnectParameters.U32, 0, 0x12345678);
            assertThatThrownBy(() -> params.validate(ConnectParameters.LENGTH))
                    .hasMessageContaining("magic 0x12345678");
        }
    }

    @Test
    void everyFieldOutsideItsRangeIsRejectedAsInvalid() {
        assertInvalid(p -> p.recvCredits(1), "recvCredits 1 outside 2-4096");
        assertInvalid(p -> p.recvCredits(0), "recvCredits 0");
        assertInvalid(p -> p.recvCredits(1 << 30), "recvCredits 1073741824");
        assertInvalid(p -> p.recvBufferSize(4), "recvBufferSize 4 outside 64-1048576");
        assertInvalid(p -> p.recvBufferSize(1 << 30), "recvBufferSize 1073741824");
        assertInvalid(p -> p.ringSize(100).ringAddress(4096), "ringSize 100");
        assertInvalid(p -> p.ringSize(-1).ringAddress(4096), "ringSize 4294967295");
        assertInvalid(p -> p.ringSize(4096 + 32).ringAddress(4096), "multiple of 64");
        assertInvalid(p -> p.ringAddress(4096), "ringAddress or ringRkey without a ring");
        assertInvalid(p -> p.segmentFlags(2), "reserved flags 2 are not 0");
        assertInvalid(p -> p.segmentFlags(0x8000 | 1), "reserved flags 32768 are not 0");
        assertInvalid(p -> p.segmentFlags(6 << 8 | 1), "pathMtu 6 is neither 0 nor 1-5");
        assertInvalid(p -> p.segmentFlags(3 << 8), "pathMtu 3 is neither 0 nor 1-5 (256-4096 bytes) with OWN_QP");
        assertThatThrownBy(() -> ConnectParameters.parse(new byte[31])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("31 bytes of connect parameters")
                .extracting(e -> ((ProtocolException) e).rejectReason())
                .isEqualTo(RejectReason.REASON_INVALID_PARAMETERS);
    }

    @Test
    void theQueuePairFlagsCarryTheOwnQueuePairAndItsPathMtu() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(ConnectParameters.LENGTH);
            ConnectParameters params = new ConnectParameters().wrap(segment).writeHeader().recvCredits(4)
                    .recvBufferSize(8192);
            assertThat(params.ownQueuePair()).isFalse();
            assertThat(params.pathMtu()).isZero();
            params.queuePair(true, 3);
            assertThat(segment.get(ConnectParameters.U16, ConnectParameters.FLAGS_OFFSET)).isEqualTo((short) 0x0301);
            byte[] wire = segment.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            ConnectParameters parsed = ConnectParameters.parse(wire);
            assertThat(parsed.ownQueuePair()).isTrue();
            assertThat(parsed.pathMtu()).isEqualTo(3);
            params.queuePair(true, 0);
            assertThat(ConnectParameters.parse(segment.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))
                    .ownQueuePair()).isTrue();
            assertThatThrownBy(() -> params.queuePair(false, 2)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> params.queuePair(true, 6)).isInstanceOf(IllegalArgumentException.class);
        }
    }

    /**
     * Every (address, rkey, size) combination: a ring is offered by its address, so only "no ring at all" and "a
     * size in range at an address" are consistent (rkey 0 is a valid key).
     */
    @ParameterizedTest(name = "address {0}, rkey {1}, size {2}")
    @CsvSource(delimiter = '|', value = {
            "0                  | 0      | 0     | ",
            "0x7f0012340000     | 0      | 0     | ringAddress or ringRkey without a ring",
            "0                  | 0xbeef | 0     | ringAddress or ringRkey without a ring",
            "0x7f0012340000     | 0xbeef | 0     | ringAddress or ringRkey without a ring",
            "0                  | 0      | 4096  | ringSize 4096 without a ringAddress",
            "0                  | 0xbeef | 4096  | ringSize 4096 without a ringAddress",
            "0x7f0012340000     | 0      | 4096  | ",
            "0x7f0012340000     | 0xbeef | 4096  | ",
            "0xfffffffffffff000 | 0xbeef | 4096  | ",
            "0xfffffffffffff040 | 0xbeef | 4096  | wraps past 2^64",
            "0x7f0012340000     | 0xbeef | 100   | ringSize 100 is neither 0 nor",
    })
    void everyRingTripleIsCheckedAsAWhole(String address, String rkey, int size, String invalid) {
        long a = Long.parseUnsignedLong(address.substring(address.startsWith("0x") ? 2 : 0),
                address.startsWith("0x") ? 16 : 10);
        int k = Integer.parseUnsignedInt(rkey.substring(rkey.startsWith("0x") ? 2 : 0), rkey.startsWith("0x") ? 16 : 10);
        java.util.function.Consumer<ConnectParameters> ring = p -> p.ringAddress(a).ringRkey(k).ringSize(size);
        if (invalid == null) {
            try (Arena arena = Arena.ofConfined()) {
                ConnectParameters params = new ConnectParameters().wrap(arena.allocate(ConnectParameters.LENGTH))
                        .writeHeader().recvCredits(4).recvBufferSize(8192);
                ring.accept(params);
                params.validate(ConnectParameters.LENGTH);
            }
            MessageHeader header = ringMessage(a, k, size);
            header.validate(MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD);
        } else {
            assertInvalid(ring, invalid);
            MessageHeader header = ringMessage(a, k, size);
            assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining(invalid);
        }
    }

    private static MessageHeader ringMessage(long address, int rkey, int size) {
        MemorySegment segment = MemorySegment.ofArray(new byte[MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD]);
        return new MessageHeader().wrap(segment, 0).write(MessageHeader.TYPE_RING, 0, 0)
                .writeRing(address, rkey, size);
    }

    private static void assertInvalid(java.util.function.Consumer<ConnectParameters> change, String message) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(ConnectParameters.LENGTH);
            ConnectParameters params = new ConnectParameters().wrap(segment).writeHeader().recvCredits(4)
                    .recvBufferSize(8192);
            params.validate(ConnectParameters.LENGTH);
            change.accept(params);
            assertThatThrownBy(() -> params.validate(ConnectParameters.LENGTH))
                    .isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("invalid connect parameters")
                    .hasMessageContaining(message)
                    .extracting(e -> ((ProtocolException) e).rejectReason())
                    .isEqualTo(RejectReason.REASON_INVALID_PARAMETERS);
        }
    }

    @Test
    void rejectReasonDescribesVersionMismatch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(RejectReason.LENGTH);
            RejectReason reason = new RejectReason().wrap(segment).write(RejectReason.REASON_VERSION_MISMATCH);
            assertThat(reason.describe(RejectReason.LENGTH))
                    .isEqualTo("connection rejected: the peer speaks protocol version 3, this side speaks 3");
            assertThat(reason.describe(0)).contains("without a netty-transport-rdma reason");
        }
    }

    @Test
    void connectionManagerRejectsAreNamed() {
        assertThat(RejectReason.describeCmReason(10)).contains("stale connection").contains("reason 10");
        assertThat(RejectReason.describeCmReason(8)).contains("nothing listens there");
        assertThat(RejectReason.describeCmReason(99)).contains("unknown reason").contains("reason 99");
    }
}
