package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * Two RC queue pairs connected through rdma_cm on the {@link TestAddress} (listener on port 0), each side with its
 * own PD, CQ, a registered 64 KiB buffer and reusable work request arrays. Driven from one thread.
 */
final class ConnectedPair implements AutoCloseable {
    static final int BUFFER_SIZE = 64 * 1024;
    static final int DEPTH = 16;
    static final int MAX_SGE = 4;
    static final int TIMEOUT_MILLIS = 10_000;
    static final int ACCESS = IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.REMOTE_WRITE | IbvAccessFlags.REMOTE_READ;

    final Side server = new Side();
    final Side client = new Side();
    CmEventChannel serverChannel;
    CmEventChannel clientChannel;
    CmId listener;
    byte[] connectPrivateData;
    byte[] acceptPrivateData;

    /** One end: id, device objects, buffer and work request arrays. */
    static final class Side {
        final Arena arena = Arena.ofShared();
        final MemorySegment buffer = arena.allocate(BUFFER_SIZE, 4096);
        CmId id;
        VerbsContext context;
        ProtectionDomain pd;
        CompletionQueue cq;
        QueuePair qp;
        MemoryRegion mr;
        final SendWorkRequests sends = new SendWorkRequests(DEPTH, MAX_SGE);
        final RecvWorkRequests recvs = new RecvWorkRequests(DEPTH, MAX_SGE);
        final WorkCompletions wcs = new WorkCompletions(DEPTH);

        void setUp(CmId id) {
            this.id = id;
            context = id.verbs();
            pd = context.allocPd();
            cq = context.createCq(2 * DEPTH, null, 0);
            qp = id.createQp(pd, new QpInitAttributes(cq, cq, null, DEPTH, DEPTH, MAX_SGE, MAX_SGE, 64, false));
            mr = pd.registerMemory(buffer, ACCESS);
        }

        /** Polls until {@code n} completions arrived (fails after the timeout). */
        List<Completion> poll(int n) {
            List<Completion> completions = new ArrayList<>();
            long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
            while (completions.size() < n) {
                int got = cq.poll(wcs, Math.min(wcs.capacity(), n - completions.size()));
                for (int i = 0; i < got; i++) {
                    completions.add(Completion.of(wcs, i));
                }
                if (got == 0) {
                    if (System.nanoTime() > deadline) {
                        fail("only " + completions.size() + " of " + n + " completions within " + TIMEOUT_MILLIS
                                + " ms: " + completions);
                    }
                    Thread.onSpinWait();
                }
            }
            return completions;
        }

        /** Asserts that no completion is pending. */
        void assertNoCompletion() {
            assertThat(cq.poll(wcs)).as("unexpected completions").isZero();
        }

        void postRecv(long wrId, long offset, int length) {
            recvs.set(0, wrId, mr, offset, length);
            qp.postRecv(recvs, 0, 1);
        }

        void close() {
            closeAll(mr, qp, cq, pd, context, id);
            sends.close();
            recvs.close();
            wcs.close();
            arena.close();
        }
    }

    static ConnectedPair connect() {
        ConnectedPair pair = new ConnectedPair();
        try {
            pair.establish();
            return pair;
        } catch (Throwable t) {
            try {
                pair.close();
            } catch (Throwable suppressed) {
                t.addSuppressed(suppressed);
            }
            throw t;
        }
    }

    private void establish() {
        serverChannel = CmEventChannel.create();
        clientChannel = CmEventChannel.create();
        listener = serverChannel.createId();
        listener.bind(new InetSocketAddress(TestAddress.get(), 0));
        listener.listen(8);
        int port = listener.localAddress().getPort();
        assertThat(port).as("listener port").isPositive();
        assertThat(listener.srcPort()).isEqualTo(port);

        CmId clientId = clientChannel.createId();
        client.id = clientId;
        clientId.resolveAddr(null, new InetSocketAddress(TestAddress.get(), port), TIMEOUT_MILLIS);
        expect(clientChannel, CmEventType.ADDR_RESOLVED).ack();
        clientId.resolveRoute(TIMEOUT_MILLIS);
        expect(clientChannel, CmEventType.ROUTE_RESOLVED).ack();
        client.setUp(clientId);
        connectPrivateData = "hello from the client".getBytes(StandardCharsets.US_ASCII);
        clientId.connect(ConnParam.of(connectPrivateData));

        CmEvent request = expect(serverChannel, CmEventType.CONNECT_REQUEST);
        assertThat(request.listenId()).isSameAs(listener);
        assertThat(request.privateData()).startsWith(connectPrivateData);
        CmId serverId = request.id();
        request.ack();
        server.setUp(serverId);
        acceptPrivateData = "welcome".getBytes(StandardCharsets.US_ASCII);
        serverId.accept(ConnParam.of(acceptPrivateData));

        CmEvent established = expect(clientChannel, CmEventType.ESTABLISHED);
        assertThat(established.typeString()).isEqualTo("RDMA_CM_EVENT_ESTABLISHED");
        assertThat(established.privateData()).startsWith(acceptPrivateData);
        established.ack();
        expect(serverChannel, CmEventType.ESTABLISHED).ack();
        assertThat(client.qp.queryState()).isEqualTo(IbvQpState.RTS);
        assertThat(server.qp.queryState()).isEqualTo(IbvQpState.RTS);
        assertThat(serverId.remoteAddress().getAddress()).isEqualTo(TestAddress.get());
        assertThat(clientId.remoteAddress().getPort()).isEqualTo(port);
    }

    /** Waits for the next event on {@code channel} and checks its type (acking and failing otherwise). */
    static CmEvent expect(CmEventChannel channel, int type) {
        assertThat(channel.await(TIMEOUT_MILLIS)).as("a %s event within %d ms", CmEventType.name(type),
                TIMEOUT_MILLIS).isTrue();
        CmEvent event = channel.getEvent();
        if (event.type() != type) {
            event.ack();
            fail("expected " + CmEventType.name(type) + ", got " + event);
        }
        return event;
    }

    /** Disconnects (if connected) and closes everything, children first. */
    @Override
    public void close() {
        if (client.id != null && client.qp != null && client.id.isOpen()) {
            client.id.disconnect();
            drain(clientChannel);
            drain(serverChannel);
        }
        client.close();
        server.close();
        closeAll(listener, serverChannel, clientChannel);
    }

    /** Acks whatever events arrive within a short while (DISCONNECTED and the like). */
    private static void drain(CmEventChannel channel) {
        if (channel == null) {
            return;
        }
        while (channel.await(200)) {
            channel.getEvent().ack();
        }
    }

    private static void closeAll(AutoCloseable... closeables) {
        for (AutoCloseable closeable : closeables) {
            if (closeable != null) {
                try {
                    closeable.close();
                } catch (Exception e) {
                    throw new AssertionError("closing " + closeable, e);
                }
            }
        }
    }
}
