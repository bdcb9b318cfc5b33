package io.netty.contrib.channel.rdma.internal;

import io.netty.contrib.channel.rdma.Rdma;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;

/**
 * The library jar's {@code Main-Class}: {@code java --enable-native-access=ALL-UNNAMED -jar
 * netty-transport-rdma.jar diagnose [address]} prints {@link Rdma#diagnose(String)}. Needs nothing but this jar
 * (the report uses no Netty class).
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) {
        if (args.length == 0 || !args[0].equals("diagnose") || args.length > 2) {
            System.err.println("usage: java --enable-native-access=ALL-UNNAMED -jar netty-transport-rdma.jar"
                    + " diagnose [address]\n"
                    + "  the RDMA libraries, devices, ports and GIDs, memory limits and rdma_cm bindability this JVM"
                    + " sees, with a fix for each problem; exit status 1 when it lists problems.\n"
                    + "  -D" + NativeLibraries.LIBRARY_PATH_PROPERTY + "=" + NativeLibraries.BUNDLED
                    + " diagnoses the bundled software RDMA device instead of the system's libraries.");
            System.exit(2);
        }
        String report = Rdma.diagnose(args.length == 2 ? args[1] : null);
        System.out.print(report);
        System.exit(report.contains("\nProblems: none") ? 0 : 1);
    }
}
