package io.netty.contrib.rdma.reactor;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.util.concurrent.DefaultThreadFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;
import reactor.netty.resources.LoopResources;

import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * reactor-netty 1.3 over RDMA ({@link RdmaLoopResources} on the software device) against reactor-netty over NIO
 * (its own {@link LoopResources}, {@code preferNative=false}), one JVM, the same workloads in the same run; server
 * and client always on different loops (one loop thread each).
 *
 * <ol>
 * <li>WebSocket small-frame burst: an {@link HttpServer} websocket route echoes every frame; a reactor-netty
 * {@link HttpClient} websocket sends {@value #BURST_FRAMES} binary frames of {@value #MIN_FRAME}..{@value #MAX_FRAME}
 * bytes (fixed seed) back to back and waits until all their echoes (counted in frames and bytes) came back; then
 * the next burst.</li>
 * <li>HTTP/1.1 pipelining: an {@link HttpServer} answers {@code GET /} with {@value #BODY} bytes; a plain Netty
 * client ({@link Bootstrap}, {@link HttpClientCodec}, {@link RdmaChannel} on an RDMA loop or
 * {@link NioSocketChannel} on a NIO loop) writes 100 requests ({@code -Dbench.pipeline=N}) in one flush on one
 * connection and waits for all the responses, counting their body bytes; then the next round.</li>
 * </ol>
 *
 * <p>A row in which no round completes for 10 s is printed as STALLED, with the state of its channels (and of
 * their RDMA connections) on stderr. reactor-netty 1.3.7's server stalled this way in the pipelining scenario over
 * RDMA (see {@link RearmReads}; fixed in 1.3.8, which this module uses); if a pipelining row stalls, the rows are
 * run again for both transports with reads re-armed ({@code -Dbench.rearm=true} runs them anyway).
 *
 * Each round is started from the client's loop as soon as the previous one completed; rounds of the warm-up are
 * not counted. Prints one line per transport and scenario and a ratio line per scenario. A benchmark, not a test:
 * {@code ./integrations/reactor-netty/benchmark.sh [warm-up seconds] [measure seconds]} (defaults 3 and 5).
 * {@link ReactorNettyBenchmarkSmokeTest} only checks that it still works.
 */
public final class ReactorNettyBenchmark {
    static final int BURST_FRAMES = 400;
    static final int MIN_FRAME = 16;
    static final int MAX_FRAME = 2048;
    static final int PIPELINE = Integer.getInteger("bench.pipeline", 100);
    static final int BODY = 64;
    /** No round completed for this long: the run is declared stalled and the channels' state is printed. */
    static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(10);

    private ReactorNettyBenchmark() {
    }

    enum Transport {
        RDMA, NIO;

        String label() {
            return name().toLowerCase();
        }
    }

    public static void main(String[] args) throws Exception {
        double warmup = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        double measure = args.length > 1 ? Double.parseDouble(args[1]) : 5;
        long warmupNanos = (long) (warmup * 1e9);
        long measureNanos = (long) (measure * 1e9);
        if (System.getProperty("io.netty.contrib.rdma.libraryPath") == null
                && System.getenv("NETTY_RDMA_LIBRARY_PATH") == null) {
            System.err.println("note: no -Dio.netty.contrib.rdma.libraryPath: using the system's RDMA libraries");
        }
        System.out.printf("reactor-netty over RDMA vs NIO, one JVM, %d cores; warm-up %.1f s, measure %.1f s per row%n",
                Runtime.getRuntime().availableProcessors(), warmup, measure);
        Rounds wsRdma = row("websocket-burst", Transport.RDMA, 1,
                () -> webSocketBurst(Transport.RDMA, warmupNanos, measureNanos, 0));
        Rounds wsNio = row("websocket-burst", Transport.NIO, 1,
                () -> webSocketBurst(Transport.NIO, warmupNanos, measureNanos, 0));
        Rounds pRdma = row("http-pipelining", Transport.RDMA, PIPELINE,
                () -> pipelining(Transport.RDMA, warmupNanos, measureNanos, 0, false));
        Rounds pNio = row("http-pipelining", Transport.NIO, PIPELINE,
                () -> pipelining(Transport.NIO, warmupNanos, measureNanos, 0, false));
        Rounds pRdmaRearmed = null;
        Rounds pNioRearmed = null;
        boolean rearm = pRdma == null || pNio == null || Boolean.getBoolean("bench.rearm");
        if (rearm) {
            System.out.println("http-pipelining again, both transports with reads re-armed (RearmReads: work-around"
                    + " for the reactor-netty 1.3.7 pipelining stall, reactor-netty issue 4361, fixed in 1.3.8):");
            pRdmaRearmed = row("http-pipelining+rearm", Transport.RDMA, PIPELINE,
                    () -> pipelining(Transport.RDMA, warmupNanos, measureNanos, 0, true));
            pNioRearmed = row("http-pipelining+rearm", Transport.NIO, PIPELINE,
                    () -> pipelining(Transport.NIO, warmupNanos, measureNanos, 0, true));
        }
        ratio("websocket-burst", "bursts/s", wsRdma, wsNio, 1);
        ratio("http-pipelining", "requests/s", pRdma, pNio, PIPELINE);
        if (rearm) {
            ratio("http-pipelining+rearm", "requests/s", pRdmaRearmed, pNioRearmed, PIPELINE);
        }
    }

    interface Run {
        Rounds run() throws Exception;
    }

    /** Runs and prints one row; a stall prints STALLED (and the state on stderr) and gives null. */
    private static Rounds row(String scenario, Transport t, int perRound, Run run) throws Exception {
        try {
            Rounds r = run.run();
            print(scenario, t, r, perRound == 1 ? "burst" : "round", perRound);
            return r;
        } catch (Stalled e) {
            System.out.printf("%s %-4s: STALLED: %s%n", scenario, t.label(), e.getMessage().lines().findFirst()
                    .orElse(""));
            System.err.println(e.getMessage());
            return null;
        }
    }

    private static void ratio(String scenario, String what, Rounds rdma, Rounds nio, int perRound) {
        if (rdma == null || nio == null) {
            System.out.printf("ratio %s RDMA/NIO: n/a (%s stalled)%n", scenario, rdma == null ? "rdma" : "nio");
            return;
        }
        System.out.printf("ratio %s RDMA/NIO: %s %.2f (median µs/%s %.0f vs %.0f)%n", scenario, what,
                rdma.perSecondAtMedian(perRound) / nio.perSecondAtMedian(perRound),
                perRound == 1 ? "burst" : "round", rdma.medianMicros(), nio.medianMicros());
    }

    private static void print(String scenario, Transport t, Rounds r, String unit, int perRound) {
        String what = perRound == 1 ? "bursts/s" : "requests/s";
        System.out.printf("%s %-4s: %,.0f %s at the median (median %.0f µs/%s, p10 %.0f, p90 %.0f; mean %,.0f %s;"
                        + " %d %ss measured after %d of warm-up, %,d bytes received)%n",
                scenario, t.label(), r.perSecondAtMedian(perRound), what, r.medianMicros(), unit,
                r.percentileMicros(10), r.percentileMicros(90), r.perSecondMean(perRound), what, r.nanos.length,
                unit, r.warmupRounds, r.bytes);
    }

    /** Durations of the measured rounds (ns), the number of warm-up rounds, the bytes received in all rounds. */
    record Rounds(long[] nanos, int warmupRounds, long bytes) {
        double percentileMicros(int p) {
            long[] s = nanos.clone();
            Arrays.sort(s);
            return s.length == 0 ? Double.NaN : s[Math.min(s.length - 1, s.length * p / 100)] / 1e3;
        }

        double medianMicros() {
            return percentileMicros(50);
        }

        double perSecondAtMedian(int perRound) {
            return perRound * 1e6 / medianMicros();
        }

        double perSecondMean(int perRound) {
            long sum = 0;
            for (long n : nanos) {
                sum += n;
            }
            return perRound * 1e9 * nanos.length / sum;
        }
    }

    /**
     * Counts the rounds on the client's loop: warm-up for {@code warmupNanos}, then measured for
     * {@code measureNanos}; or, with {@code maxRounds > 0}, exactly that many rounds, all measured.
     */
    static final class Driver {
        private final long warmupNanos;
        private final long measureNanos;
        private final int maxRounds;
        private long begin;
        private long roundStart;
        private int warmup;
        private long[] nanos = new long[4096];
        private int n;
        private long bytes;
        volatile int rounds;
        volatile String failure;
        final CompletableFuture<Rounds> done = new CompletableFuture<>();

        Driver(long warmupNanos, long measureNanos, int maxRounds) {
            this.warmupNanos = maxRounds > 0 ? 0 : warmupNanos;
            this.measureNanos = measureNanos;
            this.maxRounds = maxRounds;
        }

        void start() {
            begin = System.nanoTime();
            roundStart = begin;
        }

        /** A round completed with {@code roundBytes} received; true: start the next one. */
        boolean roundDone(long roundBytes) {
            long now = System.nanoTime();
            bytes += roundBytes;
            int r = rounds + 1;
            rounds = r;
            if (now - begin < warmupNanos) {
                warmup++;
            } else {
                if (n == nanos.length) {
                    nanos = Arrays.copyOf(nanos, n * 2);
                }
                nanos[n++] = now - roundStart;
            }
            if (maxRounds > 0 ? r >= maxRounds : now - begin >= warmupNanos + measureNanos) {
                done.complete(new Rounds(Arrays.copyOf(nanos, n), warmup, bytes));
                return false;
            }
            roundStart = System.nanoTime();
            return true;
        }

        void fail(String why) {
            failure = why;
            done.completeExceptionally(new IllegalStateException(why));
        }

        /** Waits for the last round; a stall (no round for {@link #STALL_NANOS}) fails with the state printed. */
        Rounds await(String what, Set<Channel> channels, java.util.function.Supplier<String> roundState)
                throws Exception {
            int seen = -1;
            long since = System.nanoTime();
            while (true) {
                try {
                    return done.get(200, TimeUnit.MILLISECONDS);
                } catch (TimeoutException e) {
                    int r = rounds;
                    if (r != seen) {
                        seen = r;
                        since = System.nanoTime();
                    } else if (System.nanoTime() - since > STALL_NANOS) {
                        String state = what + " stalled: no round completed for " + STALL_NANOS / 1_000_000_000
                                + " s after " + r + " rounds; " + roundState.get() + describe(channels);
                        throw new Stalled(state);
                    }
                } catch (ExecutionException e) {
                    throw new IllegalStateException(what + ": " + e.getCause().getMessage() + describe(channels),
                            e.getCause());
                }
            }
        }
    }

    /** A run in which no round completed for {@link #STALL_NANOS}; the message has the channels' state. */
    static final class Stalled extends TimeoutException {
        Stalled(String state) {
            super(state);
        }
    }

    /** The loops of one transport: reactor-netty's for the server and the client, a plain one for Bootstrap. */
    static final class Setup implements AutoCloseable {
        final Transport transport;
        final LoopResources serverLoops;
        final LoopResources clientLoops;
        final Class<? extends SocketChannel> plainChannel;
        EventLoopGroup plainGroup;

        Setup(Transport transport) {
            this.transport = transport;
            if (transport == Transport.RDMA) {
                serverLoops = RdmaLoopResources.create("bench-server", 1, true);
                clientLoops = RdmaLoopResources.create("bench-client", 1, true);
                plainChannel = RdmaChannel.class;
            } else {
                serverLoops = LoopResources.create("bench-server", 1, true);
                clientLoops = LoopResources.create("bench-client", 1, true);
                plainChannel = NioSocketChannel.class;
            }
        }

        EventLoopGroup plainGroup() {
            if (plainGroup == null) {
                plainGroup = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("bench-plain-client", true),
                        transport == Transport.RDMA ? RdmaIoHandler.newFactory() : NioIoHandler.newFactory());
            }
            return plainGroup;
        }

        @Override
        public void close() {
            if (plainGroup != null) {
                plainGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            }
            clientLoops.disposeLater(Duration.ZERO, Duration.ofSeconds(5)).block(Duration.ofSeconds(10));
            serverLoops.disposeLater(Duration.ZERO, Duration.ofSeconds(5)).block(Duration.ofSeconds(10));
        }
    }

    /** Frame sizes of a burst: the same {@value #BURST_FRAMES} sizes every burst (seed 42). */
    static int[] burstSizes() {
        Random random = new Random(42);
        int[] sizes = new int[BURST_FRAMES];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = MIN_FRAME + random.nextInt(MAX_FRAME - MIN_FRAME + 1);
        }
        return sizes;
    }

    static long burstBytes() {
        long sum = 0;
        for (int s : burstSizes()) {
            sum += s;
        }
        return sum;
    }

    /** Scenario 1; {@code maxRounds > 0}: exactly that many bursts (the smoke test). */
    static Rounds webSocketBurst(Transport transport, long warmupNanos, long measureNanos, int maxRounds)
            throws Exception {
        int[] sizes = burstSizes();
        long burstBytes = burstBytes();
        byte[] payload = new byte[MAX_FRAME];
        new Random(7).nextBytes(payload);
        Set<Channel> channels = ConcurrentHashMap.newKeySet(); // doOnConnection: once per request
        Driver driver = new Driver(warmupNanos, measureNanos, maxRounds);
        long[] got = new long[2]; // bytes, frames of the current burst (client loop only; read racily on a stall)
        try (Setup setup = new Setup(transport)) {
            DisposableServer server = HttpServer.create().runOn(setup.serverLoops, false).host("127.0.0.1").port(0)
                    .doOnConnection(c -> channels.add(c.channel()))
                    .route(routes -> routes.ws("/ws", (in, out) -> out.sendObject(in.receiveFrames()
                            .map(WebSocketFrame::retain))))
                    .bindNow(Duration.ofSeconds(10));
            try {
                Sinks.Many<WebSocketFrame> frames = Sinks.many().unicast().onBackpressureBuffer();
                InetSocketAddress address = new InetSocketAddress("127.0.0.1", server.port());
                HttpClient.create().runOn(setup.clientLoops, false).remoteAddress(() -> address)
                        .doOnConnected(c -> channels.add(c.channel()))
                        .websocket().uri("/ws")
                        .handle((in, out) -> {
                            ByteBufAllocator alloc = out.alloc();
                            Runnable burst = () -> {
                                for (int size : sizes) {
                                    frames.emitNext(new BinaryWebSocketFrame(alloc.buffer(size)
                                            .writeBytes(payload, 0, size)), Sinks.EmitFailureHandler.FAIL_FAST);
                                }
                            };
                            boolean[] finished = new boolean[1];
                            Mono<Void> echoes = in.receiveFrames().doOnNext(frame -> {
                                got[0] += frame.content().readableBytes();
                                got[1]++;
                                if (got[0] > burstBytes || got[1] > BURST_FRAMES) {
                                    driver.fail("burst " + driver.rounds + ": " + got[1] + " frames, " + got[0]
                                            + " bytes received, more than the " + BURST_FRAMES + " frames, "
                                            + burstBytes + " bytes sent");
                                    finished[0] = true;
                                } else if (got[1] == BURST_FRAMES) {
                                    if (got[0] != burstBytes) {
                                        driver.fail("burst " + driver.rounds + ": " + got[0] + " bytes echoed, "
                                                + burstBytes + " sent");
                                        finished[0] = true;
                                    } else {
                                        long b = got[0];
                                        got[0] = 0;
                                        got[1] = 0;
                                        if (driver.roundDone(b)) {
                                            burst.run();
                                        } else {
                                            finished[0] = true;
                                        }
                                    }
                                }
                                if (finished[0]) {
                                    frames.tryEmitComplete();
                                }
                            }).takeUntil(frame -> finished[0]).then();
                            driver.start();
                            burst.run();
                            return Mono.when(out.sendObject(frames.asFlux()).then(), echoes);
                        })
                        .subscribe(null, e -> driver.fail("client: " + e));
                return driver.await("websocket-burst " + transport.label(), channels,
                        () -> "current burst: " + got[1] + " of " + BURST_FRAMES + " frames, " + got[0] + " of "
                                + burstBytes + " bytes echoed");
            } finally {
                server.disposeNow(Duration.ofSeconds(5));
            }
        }
    }

    /**
     * Scenario 2; {@code maxRounds > 0}: exactly that many rounds (the smoke test). {@code rearmReads}: the server
     * connection gets a {@link RearmReads} handler (see there: a work-around for a reactor-netty 1.3.7 stall).
     */
    static Rounds pipelining(Transport transport, long warmupNanos, long measureNanos, int maxRounds,
                             boolean rearmReads) throws Exception {
        byte[] body = new byte[BODY];
        Arrays.fill(body, (byte) 'x');
        Set<Channel> channels = ConcurrentHashMap.newKeySet(); // doOnConnection: once per request
        Driver driver = new Driver(warmupNanos, measureNanos, maxRounds);
        try (Setup setup = new Setup(transport)) {
            Trace trace = new Trace();
            DisposableServer server = HttpServer.create().runOn(setup.serverLoops, false).host("127.0.0.1").port(0)
                    .doOnConnection(c -> channels.add(c.channel()))
                    .doOnChannelInit((observer, ch, remote) -> {
                        if (rearmReads) {
                            ch.pipeline().addFirst("bench.rearm", new RearmReads());
                        }
                        if (TRACE) {
                            ch.pipeline().addFirst("bench.trace", trace);
                        }
                    })
                    .route(routes -> routes.get("/", (req, res) -> res
                            .header(HttpHeaderNames.CONTENT_LENGTH, Integer.toString(BODY))
                            .sendByteArray(Mono.just(body))))
                    .bindNow(Duration.ofSeconds(10));
            Channel client = null;
            try {
                PipeliningClient handler = new PipeliningClient(driver);
                client = new Bootstrap().group(setup.plainGroup()).channel(setup.plainChannel)
                        .handler(new ChannelInitializer<Channel>() {
                            @Override
                            protected void initChannel(Channel ch) {
                                ch.pipeline().addLast(new HttpClientCodec(), handler);
                            }
                        })
                        .connect(new InetSocketAddress("127.0.0.1", server.port())).sync().channel();
                channels.add(client);
                Channel ch = client;
                ch.eventLoop().execute(() -> {
                    driver.start();
                    handler.sendRound(ch);
                });
                return driver.await("http-pipelining " + transport.label() + (rearmReads ? " (reads re-armed)" : ""),
                        channels,
                        () -> handler.state() + (TRACE ? trace.toString() : ""));
            } finally {
                if (TRACE) {
                    System.err.println("http-pipelining " + transport.label() + trace);
                }
                if (client != null) {
                    client.close().syncUninterruptibly();
                }
                server.disposeNow(Duration.ofSeconds(5));
            }
        }
    }

    /** Writes {@link #PIPELINE} GETs in one flush, counts the responses and their bytes, starts the next round. */
    static final class PipeliningClient extends SimpleChannelInboundHandler<HttpObject> {
        private final Driver driver;
        private int responses;
        private long bytes;
        private boolean stopped;

        PipeliningClient(Driver driver) {
            this.driver = driver;
        }

        @Override
        public boolean isSharable() {
            return true;
        }

        void sendRound(Channel ch) {
            for (int i = 0; i < PIPELINE; i++) {
                DefaultFullHttpRequest request = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, "/",
                        Unpooled.EMPTY_BUFFER);
                request.headers().set(HttpHeaderNames.HOST, "127.0.0.1");
                ch.write(request, ch.voidPromise());
            }
            ch.flush();
        }

        String state() {
            return "current round: " + responses + " of " + PIPELINE + " responses, " + bytes + " of "
                    + (long) PIPELINE * BODY + " body bytes";
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, HttpObject msg) {
            if (stopped) {
                return;
            }
            if (msg instanceof HttpResponse r && !r.status().equals(HttpResponseStatus.OK)) {
                stop("response " + responses + ": " + r.status());
                return;
            }
            if (msg instanceof HttpContent c) {
                bytes += c.content().readableBytes();
            }
            if (msg instanceof LastHttpContent) {
                responses++;
                if (responses == PIPELINE) {
                    long b = bytes;
                    responses = 0;
                    bytes = 0;
                    if (b != (long) PIPELINE * BODY) {
                        stop("round " + driver.rounds + ": " + b + " body bytes, expected " + (long) PIPELINE * BODY);
                    } else if (driver.roundDone(b)) {
                        sendRound(ctx.channel());
                    } else {
                        stopped = true;
                    }
                }
            }
        }

        private void stop(String why) {
            stopped = true;
            driver.fail(why);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            stop("client: " + cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (!stopped) {
                stop("client connection closed after " + driver.rounds + " rounds; " + state());
            }
        }
    }

    /**
     * Work-around for a reactor-netty 1.3.7 stall of HTTP/1.1 pipelining (reactor-netty issue 4361, pull request
     * 4347; fixed in 1.3.8, which this module now uses, so the plain rows run without it): reactor-netty's server reads on demand (auto-read off) and re-arms each read with
     * {@code ctx.read()} when a response ends, except when the response ended inside its drain of buffered
     * pipelined requests while the request's trailing {@code LastHttpContent} was still queued: then the drain
     * empties the queue and nobody reads again. Requests that are still arriving are never read. It needs the
     * previous response's write to have been still in flight when the next request came (reactor-netty then
     * buffers it: "previous ops not yet terminated"). Over RDMA a write completes with its send completion, a later
     * event, and each request the client wrote arrives as its own message, read alone, so it happens within the
     * first rounds of 100. Over NIO the write completes inside the flush: each request's operations have ended
     * before the next request is decoded, and reactor-netty never buffers one (its debug log over NIO shows no
     * "Buffering pipelined HTTP request").
     *
     * <p>This handler asks for a read after the task that flushed a response, when auto-read is off; reactor-netty
     * buffers what that reads ahead. It is used for both transports alike, and only when asked for.
     */
    static final class RearmReads extends io.netty.channel.ChannelOutboundHandlerAdapter {
        private boolean scheduled;

        @Override
        public void flush(ChannelHandlerContext ctx) {
            ctx.flush();
            if (!scheduled) {
                scheduled = true;
                ctx.executor().execute(() -> {
                    scheduled = false;
                    if (ctx.channel().isActive() && !ctx.channel().config().isAutoRead()) {
                        ctx.read();
                    }
                });
            }
        }
    }

    /**
     * With {@code -Dbench.trace=true}: the last events at the head of each server connection's pipeline (read()
     * calls, reads with their sizes, read completes, flushes, auto-read), printed when a run stalls.
     */
    static final boolean TRACE = Boolean.getBoolean("bench.trace");

    @io.netty.channel.ChannelHandler.Sharable
    static final class Trace extends io.netty.channel.ChannelDuplexHandler {
        private final java.util.ArrayDeque<String> events = new java.util.ArrayDeque<>();
        private final long t0 = System.nanoTime();

        private synchronized void add(ChannelHandlerContext ctx, String what) {
            if (events.size() == 1000) {
                events.removeFirst();
            }
            events.addLast(String.format("%9.3f ms %s autoRead=%s", (System.nanoTime() - t0) / 1e6, what,
                    ctx.channel().config().isAutoRead()));
        }

        @Override
        public void read(ChannelHandlerContext ctx) {
            add(ctx, "read()");
            ctx.read();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            add(ctx, "channelRead " + (msg instanceof io.netty.buffer.ByteBuf b ? b.readableBytes() + " B" : msg));
            ctx.fireChannelRead(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            add(ctx, "channelReadComplete");
            ctx.fireChannelReadComplete();
        }

        @Override
        public void flush(ChannelHandlerContext ctx) {
            add(ctx, "flush");
            ctx.flush();
        }

        @Override
        public synchronized String toString() {
            return "\n  server trace (last " + events.size() + " events):\n    " + String.join("\n    ", events);
        }
    }

    /** Each channel, and for an {@link RdmaChannel} its connection's state (credits, ring, sends). */
    static String describe(Set<Channel> channels) {
        StringBuilder b = new StringBuilder();
        for (Channel ch : channels) {
            b.append("\n  ").append(ch).append(" active=").append(ch.isActive()).append(" writable=")
                    .append(ch.isWritable()).append(" autoRead=").append(ch.config().isAutoRead());
            if (ch instanceof RdmaChannel) {
                try {
                    Field f = RdmaChannel.class.getDeclaredField("connection");
                    f.setAccessible(true);
                    // on the channel's loop if it still runs one; else read racily
                    Object state;
                    try {
                        state = ch.eventLoop().submit(() -> String.valueOf(f.get(ch))).get(1, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        state = f.get(ch) + " (read off the loop: " + e + ")";
                    }
                    b.append("\n    ").append(state);
                } catch (ReflectiveOperationException | RuntimeException e) {
                    b.append(" (connection state unavailable: ").append(e).append(')');
                }
            }
        }
        return b.toString();
    }
}
