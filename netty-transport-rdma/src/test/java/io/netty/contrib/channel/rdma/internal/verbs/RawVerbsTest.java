package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static io.netty.contrib.channel.rdma.internal.verbs.ConnectedPair.Side;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

/**
 * Raw verbs, no Netty: two RC QPs connected through rdma_cm exchange every operation the transport uses; errors
 * surface as completion statuses and QP states. On the software device every test ends with no device object left
 * alive.
 */
@ExtendWith(SoftwareDeviceExtension.class)
class RawVerbsTest {
    private ConnectedPair pair;
    private Side client;
    private Side server;

    @BeforeEach
    void connect() {
        pair = ConnectedPair.connect();
        client = pair.client;
        server = pair.server;
    }

    @AfterEach
    void close() {
        if (pair != null) {
            pair.close();
        }
    }

    @Test
    void sendAndReceive() {
        server.postRecv(100, 0, 4096);
        byte[] message = write(client, 0, "ping over RDMA");
        client.sends.set(0, 1, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED).sge(0, 0, client.mr, 0, message.length);
        client.qp.postSend(client.sends, 0, 1);

        // byte_len of a send completion is undefined (IBA 11.4.2.1), so it is not compared.
        Completion sent = client.poll(1).getFirst();
        assertThat(sent.wrId()).isEqualTo(1);
        assertThat(sent.status()).isEqualTo(IbvWcStatus.SUCCESS);
        assertThat(sent.opcode()).isEqualTo(IbvWcOpcode.SEND);
        assertThat(sent.qpNum()).isEqualTo(client.qp.qpNum());
        Completion received = server.poll(1).getFirst();
        assertThat(received.wrId()).isEqualTo(100);
        assertThat(received.status()).isEqualTo(IbvWcStatus.SUCCESS);
        assertThat(received.opcode()).isEqualTo(IbvWcOpcode.RECV);
        assertThat(received.byteLen()).isEqualTo(message.length);
        assertThat(received.hasImm()).isFalse();
        assertThat(received.qpNum()).isEqualTo(server.qp.qpNum());
        assertThat(read(server, 0, message.length)).isEqualTo(message);
    }

    @Test
    void sendWithImmediate() {
        server.postRecv(7, 0, 4096);
        byte[] message = write(client, 0, "with immediate");
        client.sends.set(0, 2, IbvWrOpcode.SEND_WITH_IMM, IbvSendFlags.SIGNALED)
                .immData(0, 0xCAFEBABE).sge(0, 0, client.mr, 0, message.length);
        client.qp.postSend(client.sends, 0, 1);

        assertThat(client.poll(1).getFirst().status()).isEqualTo(IbvWcStatus.SUCCESS);
        Completion received = server.poll(1).getFirst();
        assertThat(received.opcode()).isEqualTo(IbvWcOpcode.RECV);
        assertThat(received.hasImm()).isTrue();
        assertThat(received.immData()).isEqualTo(0xCAFEBABE);
        assertThat(read(server, 0, message.length)).isEqualTo(message);
    }

    @Test
    void rdmaWrite() {
        byte[] payload = write(client, 512, "written straight into the peer's memory");
        client.sends.set(0, 3, IbvWrOpcode.RDMA_WRITE, IbvSendFlags.SIGNALED)
                .rdma(0, server.mr.addr() + 8192, server.mr.rkey()).sge(0, 0, client.mr, 512, payload.length);
        client.qp.postSend(client.sends, 0, 1);

        assertThat(client.poll(1)).extracting(Completion::status, Completion::opcode)
                .containsExactly(tuple(IbvWcStatus.SUCCESS, IbvWcOpcode.RDMA_WRITE));
        assertThat(read(server, 8192, payload.length)).isEqualTo(payload);
        server.assertNoCompletion();
    }

    @Test
    void rdmaWriteWithImmediateConsumesAReceive() {
        server.postRecv(55, 0, 16);
        byte[] payload = write(client, 0, "ring slot payload");
        client.sends.set(0, 4, IbvWrOpcode.RDMA_WRITE_WITH_IMM, IbvSendFlags.SIGNALED).immData(0, 0x00010203)
                .rdma(0, server.mr.addr() + 32768, server.mr.rkey()).sge(0, 0, client.mr, 0, payload.length);
        client.qp.postSend(client.sends, 0, 1);

        assertThat(client.poll(1).getFirst().opcode()).isEqualTo(IbvWcOpcode.RDMA_WRITE);
        Completion received = server.poll(1).getFirst();
        assertThat(received.wrId()).isEqualTo(55);
        assertThat(received.opcode()).isEqualTo(IbvWcOpcode.RECV_RDMA_WITH_IMM);
        assertThat(received.hasImm()).isTrue();
        assertThat(received.immData()).isEqualTo(0x00010203);
        assertThat(received.byteLen()).isEqualTo(payload.length);
        assertThat(read(server, 32768, payload.length)).isEqualTo(payload);
    }

    @Test
    void rdmaRead() {
        byte[] remote = write(server, 40000, "read back by the client");
        client.sends.set(0, 5, IbvWrOpcode.RDMA_READ, IbvSendFlags.SIGNALED)
                .rdma(0, server.mr.addr() + 40000, server.mr.rkey()).sge(0, 0, client.mr, 100, remote.length);
        client.qp.postSend(client.sends, 0, 1);

        Completion read = client.poll(1).getFirst();
        assertThat(read.status()).isEqualTo(IbvWcStatus.SUCCESS);
        assertThat(read.opcode()).isEqualTo(IbvWcOpcode.RDMA_READ);
        assertThat(read.byteLen()).isEqualTo(remote.length);
        assertThat(read(client, 100, remote.length)).isEqualTo(remote);
    }

    @Test
    void gatherFromSeveralSgesAndScatterIntoSeveral() {
        server.recvs.wrId(0, 9).numSge(0, 0).sge(0, 0, server.mr, 1000, 5).sge(0, 1, server.mr, 3000, 100);
        server.qp.postRecv(server.recvs, 0, 1);
        write(client, 0, "one-");
        write(client, 200, "two-");
        write(client, 400, "three");
        client.sends.set(0, 6, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED)
                .sge(0, 0, client.mr, 0, 4).sge(0, 1, client.mr, 200, 4).sge(0, 2, client.mr, 400, 5);
        assertThat(client.sends.numSge(0)).isEqualTo(3);
        client.qp.postSend(client.sends, 0, 1);

        assertThat(client.poll(1).getFirst().status()).isEqualTo(IbvWcStatus.SUCCESS);
        assertThat(server.poll(1).getFirst().byteLen()).isEqualTo(13);
        assertThat(new String(read(server, 1000, 5), StandardCharsets.US_ASCII)).isEqualTo("one-t");
        assertThat(new String(read(server, 3000, 8), StandardCharsets.US_ASCII)).isEqualTo("wo-three");
    }

    @Test
    void inlineSendFromUnregisteredMemory() {
        assertThat(client.qp.maxInlineData()).as("granted max_inline_data").isGreaterThanOrEqualTo(64);
        server.postRecv(11, 0, 4096);
        byte[] message = "inline: copied at post time".getBytes(StandardCharsets.US_ASCII);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment unregistered = arena.allocate(message.length);
            MemorySegment.copy(message, 0, unregistered, JAVA_BYTE, 0, message.length);
            client.sends.set(0, 12, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED | IbvSendFlags.INLINE)
                    .sge(0, 0, unregistered, 0);
            client.qp.postSend(client.sends, 0, 1);
            unregistered.fill((byte) 0);
        }
        assertThat(client.poll(1).getFirst().status()).isEqualTo(IbvWcStatus.SUCCESS);
        assertThat(server.poll(1).getFirst().byteLen()).isEqualTo(message.length);
        assertThat(read(server, 0, message.length)).isEqualTo(message);
    }

    @Test
    void chainedPostWithSelectiveSignalling() {
        for (int i = 0; i < 4; i++) {
            server.postRecv(200 + i, i * 1024L, 1024);
        }
        for (int i = 0; i < 4; i++) {
            write(client, i * 100L, "message " + i);
            client.sends.set(i, 300 + i, IbvWrOpcode.SEND, i == 3 ? IbvSendFlags.SIGNALED : 0)
                    .sge(i, 0, client.mr, i * 100L, 9);
        }
        client.qp.postSend(client.sends, 0, 4);

        assertThat(client.poll(1)).extracting(Completion::wrId).containsExactly(303L);
        assertThat(server.poll(4)).extracting(Completion::wrId).containsExactly(200L, 201L, 202L, 203L);
        for (int i = 0; i < 4; i++) {
            assertThat(new String(read(server, i * 1024L, 9), StandardCharsets.US_ASCII)).isEqualTo("message " + i);
        }
        client.assertNoCompletion();
    }

    @Test
    void wrongRkeyGivesRemoteAccessErrorThenTheQpFlushes() {
        byte[] payload = write(client, 0, "must not land");
        client.sends.set(0, 21, IbvWrOpcode.RDMA_WRITE, IbvSendFlags.SIGNALED)
                .rdma(0, server.mr.addr(), server.mr.rkey() ^ 0x5A5A).sge(0, 0, client.mr, 0, payload.length);
        client.qp.postSend(client.sends, 0, 1);

        Completion failed = client.poll(1).getFirst();
        assertThat(IbvWcStatus.name(failed.status())).isEqualTo("REM_ACCESS_ERR");
        assertThat(client.wcs.statusString(0)).isEqualTo("remote access error");
        assertThat(failed.wrId()).isEqualTo(21);
        assertThat(IbvQpState.name(client.qp.queryState())).isEqualTo("ERR");
        assertThat(read(server, 0, payload.length)).isNotEqualTo(payload);

        client.sends.set(0, 22, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED).sge(0, 0, client.mr, 0, 4);
        client.qp.postSend(client.sends, 0, 1);
        List<Completion> flushed = client.poll(1);
        assertThat(flushed).extracting(Completion::wrId).containsExactly(22L);
        assertThat(IbvWcStatus.name(flushed.getFirst().status())).isEqualTo("WR_FLUSH_ERR");
    }

    private static byte[] write(Side side, long offset, String text) {
        byte[] bytes = text.getBytes(StandardCharsets.US_ASCII);
        MemorySegment.copy(bytes, 0, side.buffer, JAVA_BYTE, offset, bytes.length);
        return bytes;
    }

    private static byte[] read(Side side, long offset, int length) {
        return side.buffer.asSlice(offset, length).toArray(JAVA_BYTE);
    }
}
