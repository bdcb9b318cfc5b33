package io.netty.contrib.channel.rdma.internal.protocol;

import org.junit.jupiter.api.Test;

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
            assertThat(bytes).startsWith('N', 'R', 'D', 'M', 0, 2, 0, 0, 0x11, 0x22);

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
                    .hasMessage("peer speaks protocol version 7, this side speaks 2");

            assertThatThrownBy(() -> params.validate(10)).hasMessageContaining("not a netty-transport-rdma peer");
            segment.set(ConnectParameters.U32, 0, 0x12345678);
            assertThatThrownBy(() -> params.validate(ConnectParameters.LENGTH))
                    .hasMessageContaining("magic 0x12345678");
        }
    }

    @Test
    void rejectReasonDescribesVersionMismatch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(RejectReason.LENGTH);
            RejectReason reason = new RejectReason().wrap(segment).write(RejectReason.REASON_VERSION_MISMATCH);
            assertThat(reason.describe(RejectReason.LENGTH))
                    .isEqualTo("connection rejected: the peer speaks protocol version 2, this side speaks 2");
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
