package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;
import io.netty.util.concurrent.ScheduledFuture;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 13 ("Security"): a hostile peer written in C against raw verbs and rdma_cm ({@code native/tests/hostile_peer.c},
 * a second process) breaks one rule of docs/PROTOCOL.md per scenario against an echo server in a third process
 * ({@link HostileServerProcess}), while a benign {@link RdmaChannel} of this JVM streams CRC-checked data to the same
 * server. Each scenario checks that the server closes (or rejects) only the offending connection, with the
 * documented reason, and that afterwards the server runs exactly the benign connection's device objects again; the
 * last test checks the benign stream byte for byte, that the server is alive, and that closing it returns every
 * device object to the baseline measured before the first hostile connection.
 *
 * <p>The binary is {@code native/tests/build/hostile_peer}, built with the software device by {@code make -C native}
 * (the native module's compile phase); {@code -Drdma.test.hostilePeer=PATH} names another. It runs on the libraries
 * the JVMs use: {@code native/build/lib} for the bundled software device, the directory named by
 * {@code io.netty.contrib.rdma.libraryPath}, or the system's.
 */
@Timeout(120)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HostilePeerProcessTest {
    private static final Path BASEDIR = Path.of(System.getProperty("basedir", "")).toAbsolutePath();
    private static final int ESTABLISH_TIMEOUT_MILLIS = 1000;
    private static final int HALF_OPEN = 20;
    private static final int HALF_OPEN_SECONDS = 4;

    private static ChildJvm server;
    private static InetSocketAddress address;
    private static EventLoopGroup group;
    private static Channel benign;
    private static BenignStream stream;
    /** Server device objects with nothing connected, after a first connection created the loop's queues. */
    private static Map<String, Long> idle;
    /** The same with only the benign connection open. */
    private static Map<String, Long> withBenign;
    /** The server's JDK Flight Recorder file, written when it exits. */
    private static Path serverRecording;

    @BeforeAll
    static void startServerAndBenignStream() throws Exception {
        hostilePeer(); // fail before starting anything when the binary is missing
        // The server records the transport's JFR events; the last test reads them when it has exited.
        serverRecording = Files.createTempDirectory("hostile-server").resolve("server.jfr");
        server = ChildJvm.startMergingErrors(List.of("-Xmx512m",
                "-XX:StartFlightRecording:dumponexit=true,filename=" + serverRecording), HostileServerProcess.class,
                String.valueOf(ESTABLISH_TIMEOUT_MILLIS));
        String line = server.awaitLine("PORT ", 60);
        assertThat(line).as(() -> "the server's PORT line; " + server.diagnose()).isNotNull();
        address = new InetSocketAddress(TestAddress.get(), Integer.parseInt(line.substring(5).trim()));
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());

        // A first connection creates the server loop's shared queues and pool chunks: the baseline comes after it.
        Channel warmUp = echoOnce(1 << 20);
        warmUp.close().sync();
        // rdma_cm ids are destroyed after the channel closed (when their events are acknowledged): wait for them too
        idle = awaitStatus(s -> s.get("children") == 0 && s.getOrDefault("qp", 0L) == 0
                && s.getOrDefault("cm_id", 1L) == 1);
        assertThat(idle.get("children")).as("server connections after the warm-up closed").isZero();

        stream = new BenignStream();
        benign = new Bootstrap().group(group).channel(RdmaChannel.class).handler(stream).connect(address).sync()
                .channel();
        // Streaming: the server offers the benign connection a ring and keeps it: carved from the ring block the
        // warm-up registered (no new memory region), with a memory window per slab.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (stream.received() < 2 << 20 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(stream.received()).as("bytes the benign stream got back at first").isGreaterThanOrEqualTo(2 << 20);
        withBenign = awaitStatus(s -> s.get("children") == 1
                && s.getOrDefault("qp", 0L) == idle.getOrDefault("qp", 0L) + 1
                && (!s.containsKey("mw") || s.get("mw") > idle.get("mw")));
        if (withBenign.containsKey("mw")) {
            assertThat(withBenign.get("mw") - idle.get("mw")).as("server memory windows: the benign ring's slabs")
                    .isBetween(1L, 16L);
            assertThat(withBenign.get("mr")).as("server memory regions: the ring is carved from the kept block")
                    .isEqualTo(idle.get("mr"));
        }
        assertThat(withBenign.get("children")).as("server connections with the benign one").isEqualTo(1);
    }

    @AfterAll
    static void stopEverything() throws Exception {
        if (benign != null) {
            benign.close().sync();
        }
        if (group != null) {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        if (server != null) {
            server.close();
        }
        if (serverRecording != null) {
            Files.deleteIfExists(serverRecording);
            Files.deleteIfExists(serverRecording.getParent());
        }
    }

    /** Protocol violations after the handshake: the server closes that connection, naming the rule it broke. */
    @ParameterizedTest(name = "{0}")
    @Order(1)
    @CsvSource(delimiter = '|', value = {
            "credits      | beyond the 4 receive credits it was granted",
            "unknown-type | unknown message type 9",
            "bad-flags    | has unknown flags",
            "imm-length   | ring write of 1024 bytes announced 512 in its immediate",
            "ring-overlap | ring write into slab 31 of a ring of",
            "seal-wrong-window | not the slab's window",
            "seal-no-inv  | SEAL message without an invalidation",
    })
    void protocolViolationClosesOnlyTheOffendingConnection(String scenario, String rule) throws Exception {
        int from = server.output().size();
        Map<String, String> result = runHostilePeer(scenario);
        assertThat(result.get("status")).as("what the hostile peer saw: %s", result).isEqualTo("DISCONNECTED");
        String port = port(result.get("local"));
        // Reported to the child's pipeline (EXCEPTION <port>), or, for a violation before the server took ESTABLISHED
        // (before the child's handlers were added), the server's one-line report of the dropped connection.
        String exception = awaitServerLine(from, l -> violation(l) && l.contains(rule));
        assertThat(exception).as("the server's ProtocolException naming the rule '%s'; server log: %s", rule,
                serverLog(from)).isNotNull();
        if (exception.startsWith("EXCEPTION ")) {
            assertThat(exception).as("the connection that broke the rule").startsWith("EXCEPTION " + port + " ");
        }
        assertThat(awaitServerLine(from, l -> l.equals("CLOSED " + port))).as("the server closed it; server log: %s",
                serverLog(from)).isNotNull();
        assertIntactAndAtBaseline(scenario);
    }

    /**
     * A burst of SENDs far beyond the violator's 4 credits consumes, before the server can close it, the receives
     * that the loop's shared receive queue posted for other peers' credits. They must be posted again: an idle
     * connection's next message must still get through. The benign stream pauses meanwhile, so that no other
     * traffic makes the server post receives.
     */
    @Test
    @Order(3)
    void creditFloodLeavesAnIdleConnectionAbleToSend() throws Exception {
        benign.eventLoop().submit(stream::pause).get(10, TimeUnit.SECONDS);
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            long[] t = benign.eventLoop().submit(stream::totals).get(10, TimeUnit.SECONDS);
            while (t[1] != t[0] && System.nanoTime() < deadline) {
                Thread.sleep(10);
                t = benign.eventLoop().submit(stream::totals).get(10, TimeUnit.SECONDS);
            }
            assertThat(t[1]).as("the paused benign stream drained").isEqualTo(t[0]);
            // Its idle ring withdrawn (a second without writes): the RING message would post receives again.
            Map<String, Long> quiet = awaitStatus(m -> m.get("mw") == null || m.get("mw").equals(idle.get("mw")));
            assertThat(quiet.get("mw")).as("server memory windows once the benign ring is idle")
                    .isEqualTo(idle.get("mw"));
            Counting idleEcho = new Counting();
            Channel idleClient = new Bootstrap().group(group).channel(RdmaChannel.class).handler(idleEcho)
                    .connect(address).sync().channel();
            try {
                idleClient.writeAndFlush(Unpooled.wrappedBuffer(new byte[100]));
                assertThat(idleEcho.await(100, 10)).as("bytes echoed to the idle connection before the flood")
                        .isEqualTo(100);

                int from = server.output().size();
                Map<String, String> result = runHostilePeer("credits", "256");
                assertThat(result.get("status")).as("what the hostile peer saw: %s", result).isEqualTo("DISCONNECTED");
                assertThat(awaitServerLine(from, l -> violation(l)
                        && l.contains("beyond the 4 receive credits"))).as("the server's ProtocolException; server "
                        + "log: %s", serverLog(from)).isNotNull();

                idleClient.writeAndFlush(Unpooled.wrappedBuffer(new byte[100]));
                assertThat(idleEcho.await(200, 5)).as("bytes echoed to the idle connection after the flood (its "
                        + "message needs a receive on the server's shared receive queue); the flood: %s", result)
                        .isEqualTo(200);
            } finally {
                idleClient.close().sync();
            }
        } finally {
            // A connection that joins the server's loop makes it post receives up to what it granted: whatever
            // this test found, the benign stream can go on.
            new Bootstrap().group(group).channel(RdmaChannel.class).handler(new ChannelInboundHandlerAdapter())
                    .connect(address).sync().channel().close().sync();
            benign.eventLoop().submit(stream::resume).get(10, TimeUnit.SECONDS);
        }
        assertIntactAndAtBaseline("credits 256");
    }

    /** Connect parameters out of their documented range are rejected with the documented reason. */
    @ParameterizedTest(name = "{0}")
    @Order(2)
    @CsvSource(delimiter = '|', value = {
            "flags                  | INVALID_PARAMETERS | reserved flags 2 are not 0",
            "recvCredits0           | INVALID_PARAMETERS | recvCredits 0 outside 2-4096",
            "recvCredits1           | INVALID_PARAMETERS | recvCredits 1 outside 2-4096",
            "recvCreditsHuge        | INVALID_PARAMETERS | recvCredits 4294967280 outside 2-4096",
            "recvBufferSize4        | INVALID_PARAMETERS | recvBufferSize 4 outside 64-1048576",
            "recvBufferSize1G       | INVALID_PARAMETERS | recvBufferSize 1073741824 outside 64-1048576",
            "ringSize100            | INVALID_PARAMETERS | rings are offered by RING messages",
            "ringSize2G             | INVALID_PARAMETERS | rings are offered by RING messages",
            "ringAddressWithoutRing | INVALID_PARAMETERS | rings are offered by RING messages",
            "ringSizeWithoutAddress | INVALID_PARAMETERS | rings are offered by RING messages",
            "ringWraps              | INVALID_PARAMETERS | rings are offered by RING messages",
            "short                  | INVALID_PARAMETERS | connect parameters",
            "version2               | VERSION_MISMATCH   | peer speaks protocol version 2, this side speaks 5",
    })
    void badConnectParametersAreRejectedWithTheirReason(String field, String reason, String logged) throws Exception {
        int from = server.output().size();
        Map<String, String> result = runHostilePeer("bad-params:" + field);
        assertThat(result.get("status")).as("what the hostile peer saw: %s", result).isEqualTo(reason);
        assertThat(result.get("cm_status")).as("rdma_cm reject status (consumer defined)").isEqualTo("28");
        String port = port(result.get("local"));
        String line = awaitServerLine(from, l -> l.contains("rejected a connection request") && l.contains(":" + port)
                && l.contains(logged));
        assertThat(line).as("the server's log of the reject naming the field (port %s, '%s'); server log: %s", port,
                logged, serverLog(from)).isNotNull();
        assertIntactAndAtBaseline("bad-params:" + field);
    }

    /** The ring is remotely writable only: an RDMA READ of it fails at the requester. */
    @Test
    @Order(4)
    void remoteReadOfTheRingFails() throws Exception {
        Map<String, String> result = runHostilePeer("remote-read");
        assertThat(result.get("status")).as("the READ's completion: %s", result).isEqualTo("REM_ACCESS_ERR");
        assertIntactAndAtBaseline("remote-read");
    }

    /**
     * A write into another connection's ring with that connection's rkey, from a QP of the same server PD, fails
     * with a remote access error and changes nothing (the victim's unread write comes back as it wrote it).
     */
    @Test
    @Order(5)
    void crossConnectionWriteFailsWithRemoteAccessError() throws Exception {
        Map<String, String> result = runHostilePeer("cross-connection");
        assertThat(result.get("status")).as("attacker's RDMA_WRITE: %s", result).isEqualTo("REM_ACCESS_ERR");
        assertThat(result.get("imm_status")).as("attacker's RDMA_WRITE_WITH_IMM: %s", result)
                .isEqualTo("REM_ACCESS_ERR");
        assertThat(result.get("victim")).as("the victim's data in its ring: %s", result).isEqualTo("intact");
        assertIntactAndAtBaseline("cross-connection");
    }

    /**
     * Zero copy, by default, across processes: the server's application holds a buffer over the ring (the peer's
     * sealed ring write); the peer then RDMA-writes over those bytes with the rkey it was given for that slab. The
     * slab's window was invalidated before the bytes were delivered, so the device refuses the write, and the bytes
     * the server holds are the ones first written (their CRC, printed by the server after holding them, is the
     * peer's).
     */
    @Test
    @Order(4)
    void aWriteOverHeldZeroCopyBytesFailsAndChangesNothing() throws Exception {
        int from = server.output().size();
        Map<String, String> result = runHostilePeer("overwrite-held");
        assertThat(result.get("status")).as("the write over held bytes: %s", result).isEqualTo("REM_ACCESS_ERR");
        String port = port(result.get("local"));
        String held = awaitServerLine(from, l -> l.startsWith("HELD " + port + " "));
        assertThat(held).as("the server's report of the held buffer; server log: %s", serverLog(from)).isNotNull();
        assertThat(held).as("handed over without a copy, bytes unchanged")
                .isEqualTo("HELD " + port + " crc=" + result.get("crc") + " zeroCopy=true");
        assertIntactAndAtBaseline("overwrite-held");
    }

    /**
     * An RDMA WRITE the server's device refuses (an rkey never granted; with a ring, the ring's address and a wrong
     * rkey) puts the server's queue pair in the error state, and the device says so with an asynchronous event
     * (IBV_EVENT_QP_ACCESS_ERR). The server closes that connection at once, naming the event, whether or not it has a
     * ring (a connection without one has no other way to notice: with a shared receive queue it has no receives of
     * its own to be flushed).
     */
    @ParameterizedTest(name = "{0}")
    @Order(5)
    @ValueSource(strings = {"noring", "ring"})
    void refusedRemoteWriteClosesTheConnectionAtOnce(String mode) throws Exception {
        int from = server.output().size();
        Map<String, String> result = runHostilePeer("refused-write", mode);
        assertThat(result.get("status")).as("the refused RDMA_WRITE: %s", result).isEqualTo("REM_ACCESS_ERR");
        long closeMillis = Long.parseLong(result.get("close_ms"));
        System.out.println("refused-write " + mode + ": the server closed the connection " + closeMillis
                + " ms after the refused write completed at the peer");
        assertThat(closeMillis).as("ms from the refused write to the server's disconnect (-1: never); %s", result)
                .isBetween(0L, 500L);
        String port = port(result.get("local"));
        // Reported to the child's pipeline, or, when the write came before the server took ESTABLISHED (the peer
        // writes as soon as it sees its own), in the server's one-line report of the dropped connection.
        String line = awaitServerLine(from, l -> (l.startsWith("EXCEPTION " + port + " ")
                || l.contains("dropped the connection from") && l.contains(":" + port + ":"))
                && l.contains("IBV_EVENT_QP_ACCESS_ERR"));
        assertThat(line).as("the server's exception naming the event; server log: %s", serverLog(from)).isNotNull();
        assertThat(awaitServerLine(from, l -> l.equals("CLOSED " + port))).as("the server closed it; server log: %s",
                serverLog(from)).isNotNull();
        assertIntactAndAtBaseline("refused-write " + mode);
    }

    /**
     * Half-open handshakes (the server's accept taken, never established) are released within
     * {@link io.netty.contrib.channel.rdma.RdmaChannelOption#ESTABLISH_TIMEOUT_MILLIS} while the attacker stays alive, and
     * a legitimate client connects and echoes during the flood.
     */
    @Test
    @Order(6)
    void halfOpenHandshakesAreReleasedWithinTheTimeout() throws Exception {
        Process attacker = hostilePeerProcess("half-open", String.valueOf(HALF_OPEN), String.valueOf(HALF_OPEN_SECONDS));
        try {
            BlockingLines out = new BlockingLines(attacker);
            String flood = out.await("HALFOPEN ", 20);
            assertThat(flood).as(() -> "the attacker's HALFOPEN line; " + out.all()).isEqualTo("HALFOPEN connected=" + HALF_OPEN);
            long floodAt = System.nanoTime();
            assertThat(status().get("children")).as("server connections during the flood").isGreaterThan(1);

            Channel legitimate = echoOnce(100);
            long legitimateAt = System.nanoTime();
            legitimate.close().sync();

            Map<String, Long> released = awaitStatus(s -> s.get("children") == 1
                    && s.getOrDefault("qp", 0L).equals(withBenign.getOrDefault("qp", 0L)));
            long releasedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - floodAt);
            assertThat(attacker.isAlive()).as("the attacker is still alive when its connections are released").isTrue();
            assertThat(released.get("children")).as("server connections after the timeout").isEqualTo(1);
            assertThat(releasedMillis).as("time from the flood to its release (timeout %d ms)", ESTABLISH_TIMEOUT_MILLIS)
                    .isLessThan(ESTABLISH_TIMEOUT_MILLIS + 10_000L);
            assertThat(TimeUnit.NANOSECONDS.toMillis(legitimateAt - floodAt)).as("the legitimate client echoed "
                    + "during the flood").isLessThan(HALF_OPEN_SECONDS * 1000L);

            String result = out.await("RESULT ", HALF_OPEN_SECONDS + 20);
            assertThat(result).as(() -> "the attacker's RESULT; " + out.all()).contains("status=ALIVE");
            assertThat(attacker.waitFor(10, TimeUnit.SECONDS)).isTrue();
            assertIntactAndAtBaseline("half-open");
        } finally {
            attacker.destroyForcibly();
        }
    }

    @Test
    @Order(100)
    void benignStreamIntactServerAliveAndDeviceObjectsBackToBaseline() throws Exception {
        assertThat(stream.error).as("the benign connection's error").isNull();
        assertThat(benign.isActive()).as("the benign connection").isTrue();
        long[] sums = benign.eventLoop().submit(stream::stop).get(10, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        long[] now = sums;
        while (System.nanoTime() < deadline) {
            now = benign.eventLoop().submit(stream::totals).get(10, TimeUnit.SECONDS);
            if (now[1] == now[0]) {
                break;
            }
            Thread.sleep(20);
        }
        assertThat(now[0]).as("bytes the benign connection sent").isGreaterThan(1 << 20);
        assertThat(now[1]).as("bytes echoed back to the benign connection").isEqualTo(now[0]);
        assertThat(now[3]).as("CRC of the echoed stream").isEqualTo(now[2]);
        benign.close().sync();
        benign = null;
        // With nothing connected for RdmaIoHandlerConfig.memoryReleaseDelayMillis the loop also gives its shared
        // receive queue back: the baseline, with or without it.
        Map<String, Long> closed = awaitStatus(s -> atBaseline(s, idle));
        assertThat(atBaseline(closed, idle)).as("server device objects with nothing connected: %s (baseline %s)",
                closed, idle).isTrue();
        server.closeInput();
        String last = server.awaitLine("FINAL", 60);
        assertThat(last).as(() -> "the server's FINAL line; " + server.diagnose()).isNotNull();
        for (String kind : ConnectionsServerProcess.KINDS) {
            if (last.contains(kind + "=")) {
                assertThat(last).as("device objects left at the server").contains(" " + kind + "=0");
            }
        }
        assertThat(server.awaitExit(30)).as("server exit code").isZero();

        // What the server's JFR events say of it: each broken rule and each refused request, with its reason.
        List<RecordedEvent> events = RecordingFile.readAllEvents(serverRecording);
        List<String> errors = events.stream().filter(e -> e.getEventType().getName()
                .equals("io.netty.contrib.rdma.ProtocolError")).map(e -> e.getString("message")).toList();
        assertThat(errors).as("ProtocolError events").anyMatch(m -> m.contains("unknown message type 9"))
                .anyMatch(m -> m.contains("has unknown flags"))
                .anyMatch(m -> m.contains("announced 512 in its immediate"))
                .anyMatch(m -> m.contains("beyond the 4 receive credits"));
        List<String> rejects = events.stream().filter(e -> e.getEventType().getName()
                .equals("io.netty.contrib.rdma.Reject")).map(e -> e.getString("reason")).toList();
        assertThat(rejects).as("Reject events").anyMatch(r -> r.contains("recvCredits 0 outside 2-4096"))
                .anyMatch(r -> r.contains("peer speaks protocol version 2"));
        assertThat(events.stream().filter(e -> e.getEventType().getName().equals("io.netty.contrib.rdma.Accept")))
                .as("Accept events").isNotEmpty();
    }

    // ---------------------------------------------------------------- checks

    /** The benign connection still streams, the server lives and holds only the benign connection's objects. */
    private static void assertIntactAndAtBaseline(String scenario) throws Exception {
        int from = Math.max(0, server.output().size() - 200);
        assertThat(stream.error).as("the benign connection's error after %s", scenario).isNull();
        assertThat(benign.isActive()).as("the benign connection after %s", scenario).isTrue();
        long before = stream.received();
        Map<String, Long> s = awaitStatus(m -> m.equals(withBenign));
        assertThat(s).as("server device objects after %s (baseline with the benign connection: %s); server log: %s",
                scenario, withBenign, serverLog(from)).isEqualTo(withBenign);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (stream.received() == before && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(stream.received()).as("the benign stream goes on after %s", scenario).isGreaterThan(before);
    }

    /** Connects, echoes {@code bytes} and checks them; returns the open channel. */
    private static Channel echoOnce(int bytes) throws Exception {
        byte[] data = new byte[bytes];
        new Random(bytes).nextBytes(data);
        CompletableFuture<Long> echoed = new CompletableFuture<>();
        Channel ch = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter() {
                    final CRC32 crc = new CRC32();
                    long got;

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        got += buf.readableBytes();
                        crc.update(buf.nioBuffer());
                        buf.release();
                        if (got == bytes) {
                            echoed.complete(crc.getValue());
                        }
                    }
                }).connect(address).sync().channel();
        ch.writeAndFlush(Unpooled.wrappedBuffer(data));
        CRC32 crc = new CRC32();
        crc.update(data);
        assertThat(echoed.get(20, TimeUnit.SECONDS)).as("CRC of an echo of %d bytes", bytes).isEqualTo(crc.getValue());
        return ch;
    }

    private static String port(String hostAndPort) {
        assertThat(hostAndPort).as("the hostile peer's local address").isNotNull().contains(":");
        return hostAndPort.substring(hostAndPort.lastIndexOf(':') + 1);
    }

    /** The first server output line from line {@code from} on (so far, or within 10 s) that matches. */
    private static String awaitServerLine(int from, Predicate<String> match) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        do {
            List<String> lines = server.output();
            for (String line : lines.subList(Math.min(from, lines.size()), lines.size())) {
                if (match.test(line)) {
                    return line;
                }
            }
            Thread.sleep(20);
        } while (System.nanoTime() < deadline);
        return null;
    }

    /** The server's output from line {@code from} on, without STATUS answers, debug lines and stack frames. */
    private static String serverLog(int from) {
        List<String> lines = server.output();
        StringBuilder sb = new StringBuilder();
        for (String line : lines.subList(Math.min(from, lines.size()), lines.size())) {
            if (!line.startsWith("STATUS ") && !line.contains(" DEBUG ") && !line.startsWith("\tat ")) {
                sb.append("\n  ").append(line);
            }
        }
        return sb.toString();
    }

    /**
     * The device objects of a STATUS answer that must return to their baseline: every count but memory regions
     * of the registered pool, which keeps its chunks (and the shared receive queue its slot blocks) for reuse once
     * a flood made them grow; {@code mr} counts the other memory regions (the loop's ring blocks, one kept when
     * empty), {@code mw} the windows of the rings alive.
     */
    private static Map<String, Long> objects(Map<String, Long> status) {
        Map<String, Long> objects = new HashMap<>(status);
        Long chunks = objects.remove("chunks");
        if (objects.containsKey("mr")) {
            objects.put("mr", objects.get("mr") - chunks);
        }
        return objects;
    }

    /** {@code s} has what {@code idle} has, but perhaps fewer shared receive queues. */
    private static boolean atBaseline(Map<String, Long> s, Map<String, Long> idle) {
        Map<String, Long> a = new HashMap<>(s);
        Map<String, Long> b = new HashMap<>(idle);
        long srq = a.getOrDefault("srq", 0L);
        a.remove("srq");
        return b.remove("srq") != null ? a.equals(b) && srq <= idle.get("srq") : a.equals(b) && srq == 0;
    }

    private static Map<String, Long> status() throws Exception {
        server.send("STATUS");
        String line = server.awaitLine("STATUS ", 30);
        assertThat(line).as(() -> "the server's STATUS line; " + server.diagnose()).isNotNull();
        Map<String, Long> values = new HashMap<>();
        for (String field : line.substring(7).trim().split(" ")) {
            String[] kv = field.split("=");
            values.put(kv[0], Long.parseLong(kv[1]));
        }
        return objects(values);
    }

    private static Map<String, Long> awaitStatus(Predicate<Map<String, Long>> ok) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        Map<String, Long> s = status();
        while (!ok.test(s) && System.nanoTime() < deadline) {
            Thread.sleep(50);
            s = status();
        }
        return s;
    }

    // ---------------------------------------------------------------- the hostile peer

    private static Path hostilePeer() {
        Path binary = Path.of(System.getProperty("rdma.test.hostilePeer",
                BASEDIR.resolve("../native/tests/build/hostile_peer").normalize().toString()));
        assertThat(Files.isExecutable(binary)).as("the hostile peer %s is missing: build it with `make -C native` "
                + "(the native module's compile phase does) or name it with -Drdma.test.hostilePeer=PATH", binary)
                .isTrue();
        return binary;
    }

    private static Process hostilePeerProcess(String scenario, String... extra) throws IOException {
        List<String> command = new ArrayList<>(List.of(hostilePeer().toString(), scenario, TestAddress.host(),
                String.valueOf(address.getPort())));
        command.addAll(List.of(extra));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        String libraryPath = System.getProperty("io.netty.contrib.rdma.libraryPath", "bundled");
        if (libraryPath.equals("bundled")) {
            Path lib = BASEDIR.resolve("../native/build/lib").normalize();
            assertThat(Files.exists(lib.resolve("libibverbs.so.1"))).as("the software device's libraries in %s "
                    + "(the bundled device is built there by `make -C native`)", lib).isTrue();
            builder.environment().put("LD_LIBRARY_PATH", lib.toString());
        } else if (!libraryPath.equals("system")) {
            builder.environment().put("LD_LIBRARY_PATH", libraryPath);
        }
        return builder.start();
    }

    /** Runs a scenario to its end; the fields of its RESULT line. */
    private static Map<String, String> runHostilePeer(String scenario, String... extra) throws Exception {
        Process p = hostilePeerProcess(scenario, extra);
        BlockingLines out = new BlockingLines(p);
        try {
            String line = out.await("RESULT ", 30);
            assertThat(line).as(() -> "RESULT line of hostile_peer " + scenario + "; its output: " + out.all())
                    .isNotNull();
            assertThat(p.waitFor(20, TimeUnit.SECONDS)).as("hostile_peer %s exits", scenario).isTrue();
            assertThat(p.exitValue()).as("hostile_peer %s exit code; its output: %s", scenario, out.all()).isZero();
            return parse(line);
        } finally {
            p.destroyForcibly();
        }
    }

    /** {@code key=value} and {@code key="value with spaces"} fields. */
    static Map<String, String> parse(String line) {
        Map<String, String> fields = new HashMap<>();
        int i = "RESULT ".length();
        while (i < line.length()) {
            int eq = line.indexOf('=', i);
            if (eq < 0) {
                break;
            }
            String key = line.substring(i, eq).trim();
            int end;
            String value;
            if (eq + 1 < line.length() && line.charAt(eq + 1) == '"') {
                end = line.indexOf('"', eq + 2);
                end = end < 0 ? line.length() : end;
                value = line.substring(eq + 2, end);
                end++;
            } else {
                end = line.indexOf(' ', eq);
                end = end < 0 ? line.length() : end;
                value = line.substring(eq + 1, end);
            }
            fields.put(key, value);
            i = end + 1;
        }
        return fields;
    }

    /** Counts the bytes a connection receives. */
    private static final class Counting extends ChannelInboundHandlerAdapter {
        private final java.util.concurrent.atomic.AtomicLong bytes = new java.util.concurrent.atomic.AtomicLong();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            bytes.addAndGet(((ByteBuf) msg).readableBytes());
            ((ByteBuf) msg).release();
        }

        /** Waits up to {@code seconds} for {@code total} bytes; the count then. */
        long await(long total, long seconds) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (bytes.get() < total && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            return bytes.get();
        }
    }

    /** A process's output lines, read all the time. */
    private static final class BlockingLines {
        private final java.util.concurrent.BlockingQueue<String> lines = new java.util.concurrent.LinkedBlockingQueue<>();
        private final List<String> seen = new ArrayList<>();

        BlockingLines(Process p) {
            Thread t = new Thread(() -> new BufferedReader(new InputStreamReader(p.getInputStream(),
                    StandardCharsets.UTF_8)).lines().forEach(lines::add), "hostile_peer-output");
            t.setDaemon(true);
            t.start();
        }

        String await(String prefix, long seconds) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            for (;;) {
                String line = lines.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (line == null) {
                    return null;
                }
                synchronized (seen) {
                    seen.add(line);
                }
                if (line.startsWith(prefix)) {
                    return line;
                }
            }
        }

        List<String> all() {
            synchronized (seen) {
                lines.drainTo(seen);
                return new ArrayList<>(seen);
            }
        }
    }

    /**
     * The benign connection: writes random data of mixed sizes (SENDs and ring writes) at a bounded rate, at most
     * {@value #IN_FLIGHT} bytes ahead of the echo, and sums what it sent and what came back. Loop-thread confined
     * except {@link #error} and {@link #received()}.
     */
    private static final class BenignStream extends ChannelInboundHandlerAdapter {
        private static final int IN_FLIGHT = 512 << 10;
        private final Random random = new Random(13);
        private final CRC32 sentCrc = new CRC32();
        private final CRC32 receivedCrc = new CRC32();
        private long sent;
        private volatile long received;
        private boolean running = true;
        private ScheduledFuture<?> ticker;
        volatile Throwable error;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            ticker = ctx.executor().scheduleAtFixedRate(() -> write(ctx), 0, 5, TimeUnit.MILLISECONDS);
            ctx.fireChannelActive();
        }

        private void write(ChannelHandlerContext ctx) {
            int budget = 128 << 10;
            while (running && budget > 0 && sent - received < IN_FLIGHT && ctx.channel().isWritable()) {
                int size = random.nextInt(4) == 0 ? (16 << 10) + random.nextInt(112 << 10) : 1 + random.nextInt(2000);
                byte[] data = new byte[size];
                random.nextBytes(data);
                sentCrc.update(data);
                sent += size;
                budget -= size;
                ctx.write(Unpooled.wrappedBuffer(data));
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            receivedCrc.update(buf.nioBuffer());
            received += buf.readableBytes();
            buf.release();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            error = cause;
            ctx.close();
        }

        long received() {
            return received;
        }

        /** Stops writing for a while. */
        Void pause() {
            running = false;
            return null;
        }

        Void resume() {
            running = true;
            return null;
        }

        /** Stops writing; returns {@link #totals()}. */
        long[] stop() {
            running = false;
            if (ticker != null) {
                ticker.cancel(false);
            }
            return totals();
        }

        /** Bytes sent, bytes received, CRC of what was sent, CRC of what came back. */
        long[] totals() {
            return new long[] {sent, received, sentCrc.getValue(), receivedCrc.getValue()};
        }
    }

    /**
     * A server log line reporting a protocol violation: the {@code ProtocolException} fired into an established
     * channel's pipeline, or, for a violation before ESTABLISHED, the failed accept that names it.
     */
    private static boolean violation(String line) {
        return line.contains("ProtocolException") || line.contains("failed before it was established: ");
    }
}
