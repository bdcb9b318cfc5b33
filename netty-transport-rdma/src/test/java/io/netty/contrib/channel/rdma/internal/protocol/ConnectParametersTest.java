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
                    .recvCredits(0x0102_0304).recvBufferSize(8192);
            segment.set(ConnectParameters.U32, ConnectParameters.RECV_CREDITS_OFFSET, 64);

            byte[] bytes = segment.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            assertThat(bytes).startsWith('N', 'R', 'D', 'M', 0, 5, 0, 0, 0, 0);
            assertThat(bytes[ConnectParameters.RECV_BUFFER_SIZE_OFFSET + 2]).isEqualTo((byte) 0x20);

            ConnectParameters read = new ConnectParameters().wrap(segment).validate(ConnectParameters.LENGTH);
            assertThat(read.recvCredits()).isEqualTo(64);
            assertThat(read.recvBufferSize()).isEqualTo(8192);
            assertThat(read.toString()).contains("ringRkey=0x0", "recvCredits=64");
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
                    .hasMessage("peer speaks protocol version 7, this side speaks 5")
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
        assertInvalid(p -> p.ringSize(1 << 20).ringAddress(4096), "ringSize 1048576): rings are offered by RING");
        assertInvalid(p -> p.ringSize(-1).ringAddress(4096), "ringSize 4294967295");
        assertInvalid(p -> p.ringAddress(4096), "a ring in the connect parameters");
        assertInvalid(p -> p.ringRkey(7), "a ring in the connect parameters");
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
     * Every (address, size, slabs, flags) combination of a RING message: either no ring at all, or equal slabs of
     * a multiple of 64 bytes up to 16 MiB making a ring in range at an address that does not wrap.
     */
    @ParameterizedTest(name = "address {0}, size {1}, slabs {2}, flags {3}")
    @CsvSource(delimiter = '|', value = {
            "0                  | 0        | 0  | 0 | ",
            "0x7f0012340000     | 0        | 0  | 0 | ringAddress without a ring",
            "0                  | 0        | 0  | 1 | unknown ring flags 1",
            "0                  | 4096     | 1  | 0 | ringSize 4096 without a ringAddress",
            "0x7f0012340000     | 4096     | 1  | 0 | ",
            "0x7f0012340000     | 1048576  | 16 | 0 | ",
            "0x7f0012340000     | 1048576  | 16 | 1 | ",
            "0x7f0012340000     | 1048576  | 16 | 2 | unknown ring flags 2",
            "0x7f0012340000     | 1048576  | 33 | 0 | slabs 33 outside 1-32",
            "0x7f0012340000     | 1048576  | 0  | 0 | slabs 0 outside 1-32",
            "0x7f0012340000     | 1048576  | 3  | 0 | is not 3 slabs",
            "0x7f0012340000     | 33554432 | 1  | 0 | is not 1 slabs of a multiple of 64 bytes up to 16777216",
            "0x7f0012340000     | 100      | 1  | 0 | ringSize 100 is not 1 slabs",
            "0xfffffffffffff000 | 4096     | 1  | 0 | ",
            "0xfffffffffffff040 | 4096     | 1  | 0 | wraps past 2^64",
    })
    void everyRingMessageIsCheckedAsAWhole(String address, int size, int slabs, int flags, String invalid) {
        long a = Long.parseUnsignedLong(address.substring(address.startsWith("0x") ? 2 : 0),
                address.startsWith("0x") ? 16 : 10);
        int payload = MessageHeader.RING_FIXED_PAYLOAD + 4 * slabs;
        MemorySegment segment = MemorySegment.ofArray(new byte[MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD
                + 4]);
        MessageHeader header = new MessageHeader().wrap(segment, 0).write(MessageHeader.TYPE_RING, 0, 0);
        header.writeRing(a, size, new int[Math.max(slabs, 1)], Math.min(slabs, 1), flags);
        segment.set(ConnectParameters.U16, MessageHeader.RING_SLABS_OFFSET, (short) slabs);
        if (invalid == null) {
            header.validate(MessageHeader.LENGTH + payload);
        } else {
            assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH + payload))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining(invalid);
        }
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
                    .isEqualTo("connection rejected: the peer speaks protocol version 5, this side speaks 5");
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
