package io.netty.contrib.channel.rdma.testsuite.process;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Two "hosts": network namespaces joined by a veth pair (198.18.7.1 and 198.18.7.2, from the benchmarking range
 * 198.18.0.0/15), the echo server's JVM in one ({@code ip netns exec}), the client's JVM in the other; messages
 * across the SEND / ring-write boundary echoed and checked by CRC, then a clean shutdown of both. The software
 * device's instances find each other through their registry directory (the namespaces share the file system) and
 * talk over TCP between the two addresses, as devices on two hosts would.
 *
 * <p>Needs root and a working {@code ip netns}; elsewhere it is skipped (an assumption) with the reason printed.
 * The namespaces are named after this JVM's pid, removed at the end (also on failure), and those left by a JVM
 * that no longer runs are removed first.
 */
@Timeout(240)
class TwoNamespaceEchoTest {
    private static final String SERVER_ADDRESS = "198.18.7.1";
    private static final String CLIENT_ADDRESS = "198.18.7.2";
    private static final Pattern OURS = Pattern.compile("nrdma-(?:srv|cli)-(\\d+)");

    private final long pid = ProcessHandle.current().pid();
    private final String serverNs = "nrdma-srv-" + pid;
    private final String clientNs = "nrdma-cli-" + pid;
    private final String serverLink = "nrs" + pid;
    private final String clientLink = "nrc" + pid;

    @Test
    void echoBetweenTwoNamespaces() throws Exception {
        skipUnless(isRoot(), "not running as root: creating network namespaces needs root");
        removeLeftovers();
        Result add = run("ip", "netns", "add", serverNs);
        skipUnless(add.code == 0, "'ip netns add' does not work here (exit " + add.code + "): " + add.output);
        try {
            sh("ip", "netns", "add", clientNs);
            sh("ip", "link", "add", serverLink, "type", "veth", "peer", "name", clientLink);
            sh("ip", "link", "set", serverLink, "netns", serverNs);
            sh("ip", "link", "set", clientLink, "netns", clientNs);
            sh("ip", "-n", serverNs, "addr", "add", SERVER_ADDRESS + "/30", "dev", serverLink);
            sh("ip", "-n", clientNs, "addr", "add", CLIENT_ADDRESS + "/30", "dev", clientLink);
            for (String[] nsLink : new String[][] {{serverNs, serverLink}, {clientNs, clientLink}}) {
                sh("ip", "-n", nsLink[0], "link", "set", "lo", "up");
                sh("ip", "-n", nsLink[0], "link", "set", nsLink[1], "up");
            }
            echo();
        } finally {
            removeNamespaces();
        }
        assertThat(run("ip", "netns", "list").output).as("namespaces left").doesNotContain(serverNs, clientNs);
    }

    private void echo() throws Exception {
        try (ChildJvm server = ChildJvm.start(List.of("ip", "netns", "exec", serverNs), EchoServerProcess.class,
                SERVER_ADDRESS)) {
            String line = server.awaitLine("PORT ", 60);
            assertThat(line).as(() -> "the server's PORT line; " + server.diagnose()).isNotNull();
            String port = line.substring(5).trim();
            try (ChildJvm client = ChildJvm.start(List.of("ip", "netns", "exec", clientNs),
                    EchoClientProcess.class, SERVER_ADDRESS, port)) {
                String echoed = client.awaitLine("ECHOED ", 120);
                assertThat(echoed).as("the client's ECHOED line (output: %s)", client.output())
                        .isEqualTo("ECHOED " + IntStream.of(EchoClientProcess.SIZES).asLongStream().sum());
                assertThat(client.awaitExit(60)).as("client exit code").isZero();
            }
            server.closeInput();
            assertThat(server.awaitExit(60)).as("server exit code").isZero();
            assertThat(server.output()).as("the server's output after shutdown").contains("STOPPED");
        }
    }

    private static void skipUnless(boolean condition, String reason) {
        if (!condition) {
            System.out.println("TwoNamespaceEchoTest skipped: " + reason);
        }
        assumeTrue(condition, reason);
    }

    private static boolean isRoot() throws IOException {
        return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
    }

    private void removeNamespaces() throws Exception {
        run("ip", "netns", "del", serverNs);
        run("ip", "netns", "del", clientNs);
        run("ip", "link", "del", serverLink); // only there if it was never moved into its namespace
    }

    /** Namespaces of an earlier run whose JVM was killed before it could remove them. */
    private static void removeLeftovers() throws Exception {
        for (String line : run("ip", "netns", "list").output.split("\n")) {
            Matcher m = OURS.matcher(line.trim().split(" ")[0]);
            if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).isEmpty()) {
                run("ip", "netns", "del", m.group(0));
            }
        }
    }

    private static void sh(String... command) throws Exception {
        Result r = run(command);
        assertThat(r.code).as("%s: %s", String.join(" ", command), r.output).isZero();
    }

    private record Result(int code, String output) {
    }

    private static Result run(String... command) throws Exception {
        Process p;
        try {
            p = new ProcessBuilder(new ArrayList<>(List.of(command))).redirectErrorStream(true).start();
        } catch (IOException e) {
            return new Result(127, e.getMessage());
        }
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return new Result(-1, output + " (timed out)");
        }
        return new Result(p.exitValue(), output);
    }
}
