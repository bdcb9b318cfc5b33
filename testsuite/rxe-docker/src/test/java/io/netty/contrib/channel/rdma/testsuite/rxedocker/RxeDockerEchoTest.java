package io.netty.contrib.channel.rdma.testsuite.rxedocker;

import com.github.dockerjava.api.DockerClient;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.BindMode;
import org.testcontainers.containers.Container.ExecResult;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The echo and gRPC examples across two privileged containers on one Docker network, over the kernel's Soft-RoCE
 * driver (rdma_rxe) and the system rdma-core (the host's {@code /usr}, bind-mounted): each container creates its own
 * rxe device on its {@code eth0} ({@code rxe-up}, in the image), the servers run in one container and the clients in
 * the other. The echo server is dual-stack ({@code --tcp-listen}); a third container without an RDMA device runs the
 * same echo client with {@code --tcp-fallback} and reaches it over TCP.
 *
 * <p>The JDK and the examples' class path are bind-mounted at the paths they have here, so the engine's machine
 * must see this machine's file system at the same paths (the qemu guest of {@code run.sh} does: its root is the
 * host's). Skipped, with the reason printed, unless {@code DOCKER_HOST} names a reachable engine that has the
 * image and whose kernel has rdma_rxe.
 */
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class RxeDockerEchoTest {
    private static final int ECHO_PORT = 7474;
    private static final int RPC_PORT = 7575;
    private static final String SYSTEM_LIBRARIES = "/usr/lib/x86_64-linux-gnu";
    /** A client JVM that has not exited after this long is cut ({@code timeout} in its container). */
    private static final int CLIENT_SECONDS = 300;
    /**
     * How long the containers live if nothing stops them (a test JVM killed before {@code @AfterAll}): the client
     * container's {@code sleep} and the server JVMs' {@code timeout}. It must outlast every test of the class: the
     * servers serve all three clients, one after the other.
     */
    private static final int CONTAINER_SECONDS = 3600;
    /** rxe-vm's AF_PACKET capture of RoCE v2 packets by TOS (the image has no tcpdump; python3 is the host's). */
    private static final Path ROCE_CAPTURE = Path.of("../rxe-vm/roce-capture.py").toAbsolutePath().normalize();

    private static Network network;
    private static GenericContainer<?> server;
    private static GenericContainer<?> client;
    /** A container without an RDMA device: its clients reach the servers over TCP, by the same code. */
    private static GenericContainer<?> plain;
    private static String serverAddress;
    /** The JVM command line of the examples, servers and clients alike (without a time limit). */
    private static List<String> java;

    /** Why the tests are skipped, or null; each test checks it, so that each is reported as skipped. */
    private static String skipReason;

    @BeforeAll
    static void startContainers() throws IOException {
        try {
            start();
        } catch (Skip skip) {
            skipReason = skip.getMessage();
            System.out.println("RxeDockerEchoTest skipped: " + skipReason);
        }
    }

    @BeforeEach
    void skipWithoutRxeEngine() {
        assumeTrue(skipReason == null, skipReason);
    }

    private static void start() throws IOException {
        String dockerHost = System.getenv("DOCKER_HOST");
        skipUnless(dockerHost != null && !dockerHost.isBlank(), "DOCKER_HOST is not set (testsuite/rxe-docker/run.sh"
                + " starts an engine whose kernel has rdma_rxe and runs this test against it)");
        skipUnless(DockerClientFactory.instance().isDockerAvailable(), "no Docker engine answers at " + dockerHost);
        DockerImageName image = DockerImageName.parse(System.getProperty("rxe.docker.image", "netty-rdma-rxe:local"));
        DockerClient docker = DockerClientFactory.instance().client();
        skipUnless(docker.listImagesCmd().withImageNameFilter(image.asCanonicalNameString()).exec().size() > 0
                        || docker.listImagesCmd().withImageNameFilter(image.toString()).exec().size() > 0,
                "the engine at " + dockerHost + " has no image " + image + " (run.sh imports it)");

        String javaHome = System.getProperty("java.home");
        Path classpathFile = Path.of(System.getProperty("rxe.docker.classpath"));
        List<String> entries = containerClasspath(classpathFile);
        String classpath = String.join(":", entries);
        java = List.of(javaHome + "/bin/java", "--enable-native-access=ALL-UNNAMED",
                "-Xmx256m", "-XX:+UseSerialGC",
                // C1 only: under the qemu guest's instruction emulation C2's compilations cost more than they return
                "-XX:TieredStopAtLevel=1", "-Dio.netty.contrib.rdma.libraryPath=" + SYSTEM_LIBRARIES,
                "-cp", classpath);

        network = Network.newNetwork();
        // The client container first: it also tells whether the engine's kernel has rdma_rxe at all.
        client = container(image, javaHome, entries)
                .withCommand("sh", "-c", "if [ ! -d /sys/module/rdma_rxe ]; then echo NO-RDMA-RXE; exec sleep 600; fi;"
                        + " if /opt/rxe/rxe-up; then echo RXE-READY; else echo RXE-FAILED; fi; exec sleep "
                        + CONTAINER_SECONDS)
                .waitingFor(Wait.forLogMessage(".*(RXE-READY|RXE-FAILED|NO-RDMA-RXE).*\\n", 1)
                        .withStartupTimeout(Duration.ofMinutes(2)));
        client.start();
        String clientLog = client.getLogs();
        System.out.print("client container: " + clientLog);
        skipUnless(!clientLog.contains("NO-RDMA-RXE"), "the kernel of the engine at " + dockerHost
                + " has no rdma_rxe module loaded");
        assertTrue(clientLog.contains("RXE-READY"), "rxe-up failed in the client container: " + clientLog);

        // The servers live as long as the containers, not as long as one client (CLIENT_SECONDS). Cut at 300 s like
        // the clients, they were gone before the third client of a slow run (CI: two guests on two cores), and the
        // server container with them: that client's connect failed with ADDR_ERROR (-ETIMEDOUT: nothing answered
        // ARP) or, while its neighbour entry was still valid, UNREACHABLE or a connect timeout. Each server's end is
        // logged with its exit status.
        String servers = "timeout " + CONTAINER_SECONDS + " " + String.join(" ", quoted(java));
        server = container(image, javaHome, entries)
                .withFileSystemBind(ROCE_CAPTURE.toString(), ROCE_CAPTURE.toString(), BindMode.READ_ONLY)
                .withCommand("sh", "-c", "/opt/rxe/rxe-up && { { " + servers
                        + " io.netty.contrib.channel.rdma.examples.echo.EchoServer --address 0.0.0.0 --tcp-listen --port "
                        + ECHO_PORT + "; echo \"EchoServer exited with status $?\"; } & { " + servers
                        + " io.netty.contrib.channel.rdma.examples.rpc.RpcServer --address 0.0.0.0 --port " + RPC_PORT
                        + "; echo \"RpcServer exited with status $?\"; } & wait; }")
                .waitingFor(Wait.forLogMessage(".*listening on.*\\n", 2).withStartupTimeout(Duration.ofMinutes(3)));
        server.start();
        serverAddress = server.getContainerInfo().getNetworkSettings().getNetworks().values().iterator().next()
                .getIpAddress();
        System.out.print("server container (" + serverAddress + "): " + server.getLogs());

        // No rxe device of its own, and none of the others' either: the kernel's rdma subsystem is shared by the
        // network namespaces, so the devices other containers made are in its sysfs, and their nodes in the copy of
        // /dev it got at start; without the nodes rdma-core lists no device.
        plain = container(image, javaHome, entries)
                .withCommand("sh", "-c", "rm -rf /dev/infiniband; echo PLAIN-READY; exec sleep " + CONTAINER_SECONDS)
                .waitingFor(Wait.forLogMessage(".*PLAIN-READY.*\\n", 1).withStartupTimeout(Duration.ofMinutes(2)));
        plain.start();
    }

    @AfterAll
    static void stopContainers() {
        if (server != null) {
            System.out.print("server container log: " + server.getLogs());
            server.stop();
        }
        if (client != null) {
            client.stop();
        }
        if (plain != null) {
            plain.stop();
        }
        if (network != null) {
            network.close();
        }
    }

    @Test
    void echoSmallMessages() throws Exception {
        String out = runClient("io.netty.contrib.channel.rdma.examples.echo.EchoClient", "--size", "64",
                "--count", "500");
        assertTrue(out.contains("500 echoes of 64 B over 1 connection(s): all verified (CRC32)"), out);
        assertTrue(out.contains("round trip: p50"), out);
    }

    @Test
    void echoLargeMessages() throws Exception {
        String out = runClient("io.netty.contrib.channel.rdma.examples.echo.EchoClient", "--size", "65536",
                "--count", "100", "--concurrency", "2");
        assertTrue(out.contains("200 echoes of 65536 B over 2 connection(s): all verified (CRC32)"), out);
        assertTrue(out.contains("round trip: p50"), out);
    }

    @Test
    void aContainerWithoutRdmaReachesTheDualStackServerOverTcp() throws Exception {
        String out = runClient(plain, "io.netty.contrib.channel.rdma.examples.echo.EchoClient", "--tcp-fallback",
                "--size", "64", "--count", "500");
        assertTrue(out.contains("over TCP instead of RDMA: no RDMA on this host"), out);
        assertTrue(out.contains("500 echoes of 64 B over 1 connection(s): all verified (CRC32)"), out);
        // The same code with an RDMA device: the client container's client with the same flag stays on RDMA. Under
        // emulation, with the other guest beside it, an RDMA connect took 11.7 s: RDMA gets 60 s before TCP.
        String rdma = runClient("io.netty.contrib.channel.rdma.examples.echo.EchoClient", "--tcp-fallback",
                "--tcp-fallback-timeout", "60000", "--size", "64", "--count", "500");
        assertFalse(rdma.contains("over TCP instead of RDMA"), rdma);
        assertTrue(rdma.contains("500 echoes of 64 B over 1 connection(s): all verified (CRC32)"), rdma);
    }

    @Test
    void grpcSample() throws Exception {
        String out = runClient("io.netty.contrib.channel.rdma.examples.rpc.RpcClient", "--count", "30",
                "--sizes", "64,16384,262144");
        assertTrue(out.contains("Echo (unary): "), out);
        assertTrue(out.contains("all verified"), out);
    }

    /**
     * A connection with traffic class 104 ({@code IP_TOS}, DSCP 26) carries it in the IP header of its RoCE v2
     * packets: counted by TOS on the server container's netdevs while the echo client runs. Both directions: the
     * server's queue pair takes the client's traffic class (the connect request carries the client's path).
     */
    @Test
    void trafficClassIsTheDscpOfTheRoceV2Packets() throws Exception {
        ExecResult started = server.execInContainer("sh", "-c", "setsid python3 " + ROCE_CAPTURE
                + " --seconds 240 >/tmp/roce-capture.txt 2>&1 </dev/null & echo $! >/tmp/roce-capture.pid;"
                + " for i in $(seq 100); do grep -q capturing /tmp/roce-capture.txt && exit 0; sleep 0.2; done;"
                + " cat /tmp/roce-capture.txt; exit 1");
        assertEquals(0, started.getExitCode(), () -> "the capture did not start: " + started.getStdout()
                + started.getStderr());
        String out = runClient("io.netty.contrib.channel.rdma.examples.echo.EchoClient", "--size", "64",
                "--count", "200", "--tos", "104");
        assertTrue(out.contains("200 echoes of 64 B over 1 connection(s): all verified (CRC32)"), out);
        ExecResult captured = server.execInContainer("sh", "-c", "pid=$(cat /tmp/roce-capture.pid); kill -TERM $pid;"
                + " while kill -0 $pid 2>/dev/null; do sleep 0.2; done; cat /tmp/roce-capture.txt");
        String capture = captured.getStdout();
        System.out.print("RoCE v2 packets in the server container, by TOS:\n" + capture);
        Matcher m = Pattern.compile("tos 104 dscp 26 ecn 0: (\\d+) packets on eth0").matcher(capture);
        assertTrue(m.find(), capture);
        // 200 echoes: a request and an acknowledged response each way, at the least
        assertTrue(Integer.parseInt(m.group(1)) >= 400, capture);
    }

    /** Runs a client in the client container against the server container; returns what it printed. */
    private static String runClient(String mainClass, String... args) throws Exception {
        return runClient(client, mainClass, args);
    }

    /** Runs a client in {@code container} against the server container; returns what it printed. */
    private static String runClient(GenericContainer<?> container, String mainClass, String... args)
            throws Exception {
        List<String> command = new ArrayList<>(List.of("timeout", String.valueOf(CLIENT_SECONDS)));
        command.addAll(java);
        command.add(mainClass);
        command.add("--address");
        command.add(serverAddress);
        command.add("--port");
        command.add(String.valueOf(mainClass.contains(".rpc.") ? RPC_PORT : ECHO_PORT));
        // Under the guest's instruction emulation the set-up of a client JVM's first connection (its first rdma_cm and
        // verbs calls, the first registered chunk, rxe's address resolution) has taken 6 to 18 s without the rxe-vm
        // guest beside this one (EchoClient prints it, "connected ... in"; RpcClient's first call includes it and took
        // up to 28 s), more with it: Netty's default connect timeout of 30 s leaves too little margin. rdma_cm's
        // address resolution keeps the library's 2 s (RESOLVE_TIMEOUT_MILLIS), not these 180 s: when the peer's
        // neighbour (ARP) entry is missing, the ARP reply here arrives within rdma_resolve_addr, before the kernel has
        // queued the request it would wake (drivers/infiniband/core/addr.c), so the resolution ends only when its
        // timeout expires or some other neighbour entry changes state: after 2 s with the default, after 3 to 30 s
        // measured with 180 s.
        command.add("--connect-timeout");
        command.add("180");
        command.addAll(Arrays.asList(args));
        long start = System.nanoTime();
        ExecResult result = container.execInContainer(command.toArray(String[]::new));
        String out = result.getStdout() + result.getStderr();
        System.out.printf("%s %s (%d ms, exit %d):%n%s", mainClass.substring(mainClass.lastIndexOf('.') + 1),
                String.join(" ", args), (System.nanoTime() - start) / 1_000_000, result.getExitCode(), out);
        assertEquals(0, result.getExitCode(), () -> out + serverState());
        assertFalse(out.contains("software RDMA device"), "ran on the software device: " + out);
        return out;
    }

    /** For a failed client: whether the servers were still there to answer, and what they printed. */
    private static String serverState() {
        return "\nserver container " + (server.isRunning() ? "running" : "stopped") + "; its log:\n"
                + server.getLogs();
    }

    /**
     * The examples' class path for the containers. The project's own jars (those not in the Maven repository)
     * are copied to a folder of their own for each run: the qemu guest of run.sh caches the host's files
     * (9p, cache=loose) and would go on serving a jar as it was when first read, after a rebuild.
     */
    private static List<String> containerClasspath(Path classpathFile) throws IOException {
        Path repository = Path.of(System.getProperty("user.home"), ".m2", "repository");
        Path target = classpathFile.toAbsolutePath().getParent();
        try (var old = Files.list(target)) {
            for (Path dir : old.filter(p -> p.getFileName().toString().startsWith("containers-run-")).toList()) {
                try (var files = Files.list(dir)) {
                    for (Path f : files.toList()) {
                        Files.delete(f);
                    }
                }
                Files.delete(dir);
            }
        }
        Path run = Files.createDirectory(target.resolve("containers-run-" + System.currentTimeMillis()));
        List<String> entries = new ArrayList<>();
        for (String entry : Files.readString(classpathFile).strip().split(":")) {
            Path p = Path.of(entry);
            if (p.startsWith(repository) || !Files.isRegularFile(p)) {
                entries.add(entry);
            } else {
                entries.add(Files.copy(p, run.resolve(p.getFileName())).toString());
            }
        }
        return entries;
    }

    private static GenericContainer<?> container(DockerImageName image, String javaHome, List<String> classpath) {
        // the image has no /usr of its own: the host's (the engine's machine sees it at the same path) provides
        // the shell, rdma-core with its rxe provider, iproute2's rdma tool and, usually, the JDK
        GenericContainer<?> c = new GenericContainer<>(image).withPrivilegedMode(true).withNetwork(network)
                .withFileSystemBind("/usr", "/usr", BindMode.READ_ONLY);
        if (!javaHome.startsWith("/usr/")) {
            c.withFileSystemBind(javaHome, javaHome, BindMode.READ_ONLY);
        }
        for (String entry : classpath) {
            c.withFileSystemBind(entry, entry, BindMode.READ_ONLY);
        }
        return c;
    }

    private static List<String> quoted(List<String> words) {
        return words.stream().map(w -> "'" + w.replace("'", "'\\''") + "'").toList();
    }

    private static void skipUnless(boolean condition, String reason) {
        if (!condition) {
            throw new Skip(reason);
        }
    }

    private static final class Skip extends RuntimeException {
        Skip(String reason) {
            super(reason, null, false, false);
        }
    }
}
