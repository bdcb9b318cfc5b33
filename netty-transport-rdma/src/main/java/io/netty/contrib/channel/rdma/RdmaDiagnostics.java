package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.PageMode;
import io.netty.contrib.channel.rdma.internal.memory.PageProbe;
import io.netty.contrib.channel.rdma.internal.memory.PinnedMemory;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.DeviceAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.Errno;
import io.netty.contrib.channel.rdma.internal.verbs.GidEntry;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.PortAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.PortCounters;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsDevice;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;
import io.netty.util.internal.SystemPropertyUtil;

import java.io.IOException;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The text of {@link Rdma#diagnose(String)}: what this JVM can see of RDMA, and for each problem the fix. Reads
 * {@code /proc} and {@code /sys} and calls the verbs; every part is guarded, so a missing library or device is
 * reported, never thrown. Uses no Netty class: {@code java -jar netty-transport-rdma.jar diagnose} runs it with
 * this jar alone on the class path.
 */
final class RdmaDiagnostics {
    private static final String[] PORT_STATES = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    private static final int CAP_IPC_LOCK = 14;
    private static final long MIB = 1 << 20;
    /** An idle connection's registered memory by default: the receive slots of its initial credits. */
    private static final long IDLE_CONNECTION_BYTES = (long) RdmaChannelConfig.INITIAL_RECEIVE_CREDITS
            * RdmaChannelConfig.DEFAULT_RECEIVE_SLOT_SIZE;
    /** A connection moving large messages: slots for its whole grant, and its receive ring. */
    private static final long CONNECTION_BYTES = (long) RdmaChannelConfig.DEFAULT_RECEIVE_CREDITS
            * RdmaChannelConfig.DEFAULT_RECEIVE_SLOT_SIZE + RdmaChannelConfig.DEFAULT_RING_SIZE;

    private final StringBuilder out = new StringBuilder();
    private final List<String> problems = new ArrayList<>();
    private final Path sysfs;

    private RdmaDiagnostics(Path sysfs) {
        this.sysfs = sysfs;
    }

    /** The report; {@code address} (may be {@code null}) is an address to try binding rdma_cm to. */
    static String report(String address) {
        RdmaDiagnostics d = new RdmaDiagnostics(Path.of("/sys/class/infiniband"));
        d.run(address);
        return d.out.toString();
    }

    private void run(String address) {
        String version = RdmaDiagnostics.class.getPackage().getImplementationVersion();
        line("netty-transport-rdma " + (version == null ? "(version unknown: not run from the jar)" : version)
                + " diagnose: Java " + System.getProperty("java.version") + ", " + System.getProperty("os.name")
                + " " + read(Path.of("/proc/sys/kernel/osrelease")).trim() + " " + System.getProperty("os.arch"));
        section("Libraries", this::libraries);
        section("Kernel", this::kernel);
        boolean loaded = NativeLibraries.loadFailure() == null;
        if (loaded) {
            section("Devices (verbs)", this::devices);
        }
        section("Memory", this::memory);
        if (loaded) {
            section("Port counters", this::counters);
        }
        if (loaded) {
            section("rdma_cm", () -> rdmaCm(address));
            section("Connection", () -> connection(address));
        }
        line("");
        if (problems.isEmpty()) {
            line("Problems: none");
        } else {
            line("Problems: " + problems.size());
            for (String p : problems) {
                line("  - " + p);
            }
        }
    }

    private void libraries() {
        line("  selected: " + NativeLibraries.description() + " (" + NativeLibraries.source() + "; choose with -D"
                + NativeLibraries.LIBRARY_PATH_PROPERTY + " or " + NativeLibraries.LIBRARY_PATH_ENV + ")");
        Throwable failure = NativeLibraries.loadFailure();
        if (failure != null) {
            line("  loaded:   nothing: " + failure.getMessage());
            problem("the RDMA libraries did not load", failure.getMessage());
            return;
        }
        Set<String> files = mappedLibraries();
        for (String file : files) {
            line("  loaded:   " + file + version(file));
        }
        if (NativeLibraries.isSoftwareDevice()) {
            line("            (the project's software RDMA device, not rdma-core)");
        } else {
            providers(files);
        }
        Throwable cause = Rdma.unavailabilityCause();
        line("  status:   " + (cause == null ? "available" : "unavailable: " + cause.getMessage()));
        // A missing device is reported with its fix by the sections below; anything else (missing symbols, ...) here.
        if (cause != null && !cause.getMessage().startsWith("no RDMA device")) {
            problem("RDMA is unavailable", cause.getMessage());
        }
        if (!GidEntry.supported()) {
            line("  note:     libibverbs lacks ibv_query_gid_ex (rdma-core < 32): GID types come from sysfs only");
        }
    }

    /** The rdma-core libraries this process has mapped, from {@code /proc/self/maps}. */
    private static Set<String> mappedLibraries() {
        Set<String> files = new LinkedHashSet<>();
        for (String line : read(Path.of("/proc/self/maps")).split("\n")) {
            int slash = line.indexOf('/');
            if (slash < 0) {
                continue;
            }
            String file = line.substring(slash);
            String name = file.substring(file.lastIndexOf('/') + 1);
            if (name.startsWith("libibverbs") || name.startsWith("librdmacm") || name.contains("-rdmav")) {
                files.add(file);
            }
        }
        return files;
    }

    /** " (rdma-core 44, libibverbs.so.1.14.44.0)" from the file the soname links to, when it says. */
    private static String version(String file) {
        try {
            String real = Path.of(file).toRealPath().getFileName().toString();
            int so = real.indexOf(".so.");
            String[] parts = so < 0 ? new String[0] : real.substring(so + 4).split("\\.");
            if (parts.length >= 3) {
                return " (rdma-core " + parts[2] + ", " + real + ")";
            }
            return real.equals(Path.of(file).getFileName().toString()) ? "" : " (" + real + ")";
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    /** The provider (driver) libraries installed next to the system libibverbs. */
    private void providers(Set<String> files) {
        for (String file : files) {
            if (!file.contains("libibverbs.so")) {
                continue;
            }
            Path dir = Path.of(file).getParent().resolve("libibverbs");
            List<String> names = new ArrayList<>();
            try (Stream<Path> list = Files.list(dir)) {
                list.map(p -> p.getFileName().toString()).filter(n -> n.contains("-rdmav"))
                        .map(n -> n.substring(3, n.indexOf("-rdmav"))).sorted().forEach(names::add);
            } catch (IOException | RuntimeException e) {
                // no provider directory: reported below
            }
            line("  providers: " + (names.isEmpty() ? "none in " + dir : names.size() + " in " + dir + ": "
                    + String.join(" ", names)));
            if (names.isEmpty()) {
                problem("no libibverbs provider (driver) libraries are installed",
                        "apt-get install ibverbs-providers (RHEL/Fedora: dnf install rdma-core)");
            }
            return;
        }
    }

    private void kernel() {
        List<String> modules = new ArrayList<>();
        for (String line : read(Path.of("/proc/modules")).split("\n")) {
            String name = line.split(" ", 2)[0];
            if (name.startsWith("ib_") || name.startsWith("rdma_") || name.startsWith("mlx") || name.equals("irdma")
                    || name.equals("bnxt_re") || name.equals("siw") || name.equals("efa")) {
                modules.add(name);
            }
        }
        Collections.sort(modules);
        line("  modules:  " + (modules.isEmpty() ? "no RDMA module loaded (or /proc/modules unreadable)"
                : String.join(" ", modules)));
        List<String> devices = list(sysfs);
        line("  " + sysfs + ": " + (devices.isEmpty() ? "absent or empty: the kernel has no RDMA device"
                : String.join(" ", devices)));
        Path dev = Path.of("/dev/infiniband");
        List<String> nodes = list(dev);
        line("  " + dev + ": " + (nodes.isEmpty() ? "absent" : String.join(" ", nodes)));
        boolean software = NativeLibraries.isSoftwareDevice();
        if (devices.isEmpty() && !software) {
            problem("the kernel has no RDMA device",
                    "load the NIC's RDMA driver (e.g. modprobe mlx5_ib), or add a Soft-RoCE device: modprobe rdma_rxe"
                            + " && rdma link add rxe0 type rxe netdev eth0; or use the software device: -D"
                            + NativeLibraries.LIBRARY_PATH_PROPERTY + "=" + NativeLibraries.BUNDLED);
        } else if (!devices.isEmpty() && !software && (!nodes.contains("rdma_cm") || nodes.stream()
                .noneMatch(n -> n.startsWith("uverbs")))) {
            problem("/dev/infiniband lacks uverbs* or rdma_cm", "modprobe ib_uverbs rdma_ucm (in a container:"
                    + " pass --device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm)");
        }
    }

    private void devices() {
        List<VerbsDevice> devices;
        try {
            devices = VerbsDevice.list();
        } catch (RuntimeException e) {
            line("  " + e.getMessage());
            return;
        }
        if (devices.isEmpty()) {
            line("  none");
            return;
        }
        for (VerbsDevice device : devices) {
            try (VerbsContext context = VerbsContext.open(device.name())) {
                DeviceAttributes a = context.queryDevice();
                line("  " + device.name() + ": node GUID " + String.format("%016x", device.guid()) + ", firmware "
                        + (a.fwVer().isEmpty() ? "-" : a.fwVer()) + ", max_qp " + a.maxQp() + ", max_cqe "
                        + a.maxCqe() + ", max_mr_size " + Long.toUnsignedString(a.maxMrSize()) + ", ports "
                        + a.physPortCnt());
                if (RdmaDevices.isKernelRxe(a, NativeLibraries.isSoftwareDevice())) {
                    line("    kernel rxe: no receive rings by default (its retransmissions replay memory-window work;"
                            + " large messages travel as SENDs); -D" + RdmaConnection.KERNEL_RXE_RINGS_PROPERTY
                            + "=true offers them" + (SystemPropertyUtil.getBoolean(
                            RdmaConnection.KERNEL_RXE_RINGS_PROPERTY, false) ? " (set)" : ""));
                }
                for (int port = 1; port <= a.physPortCnt(); port++) {
                    port(device.name(), context, port);
                }
            } catch (RuntimeException e) {
                line("  " + device.name() + ": cannot open or query: " + e.getMessage());
                problem("device " + device.name() + " cannot be opened (" + e.getMessage() + ")",
                        "check the permissions of /dev/infiniband/uverbs*; in a container, pass the device nodes");
            }
        }
    }

    private void port(String device, VerbsContext context, int port) {
        PortAttributes p = context.queryPort(port);
        String state = p.state() >= 0 && p.state() < PORT_STATES.length ? PORT_STATES[p.state()] : "" + p.state();
        String link = p.linkLayer() == 2 ? "Ethernet (RoCE)" : p.linkLayer() == 1 ? "InfiniBand" : "unspecified";
        line("    port " + port + ": " + state + ", link layer " + link + ", MTU active " + mtu(p.activeMtu())
                + " / max " + mtu(p.maxMtu()) + ", LID " + p.lid() + ", GID table " + p.gidTblLen() + " entries");
        Path sysPort = sysfs.resolve(device).resolve("ports").resolve(String.valueOf(port));
        if (Files.isDirectory(sysPort)) {
            line("      sysfs: state " + read(sysPort.resolve("state")).trim() + ", phys_state "
                    + read(sysPort.resolve("phys_state")).trim() + ", link_layer "
                    + read(sysPort.resolve("link_layer")).trim());
        }
        if (p.state() != PortAttributes.STATE_ACTIVE) {
            problem(device + " port " + port + " is " + state, p.linkLayer() == 2
                    ? "bring its netdev up and check the link (ip link set <netdev> up; ethtool <netdev>)"
                    : "check the cable and the subnet manager (sminfo; systemctl start opensm)");
        }
        int shown = 0;
        boolean roceV2 = false;
        for (int i = 0; i < p.gidTblLen() && shown < 16; i++) {
            String gid;
            String type;
            String netdev;
            try {
                if (GidEntry.supported()) {
                    GidEntry e = GidEntry.query(context, port, i);
                    if (e == null) {
                        continue;
                    }
                    gid = formatGid(e.gid());
                    type = GidEntry.typeName(e.type());
                    netdev = e.ifindex() == 0 ? "" : netdevName(e.ifindex());
                    roceV2 |= e.type() == GidEntry.TYPE_ROCE_V2;
                } else {
                    byte[] raw = context.queryGid(port, i);
                    if (isZero(raw)) {
                        continue;
                    }
                    gid = formatGid(raw);
                    type = read(sysPort.resolve("gid_attrs/types/" + i)).trim();
                    netdev = read(sysPort.resolve("gid_attrs/ndevs/" + i)).trim();
                    roceV2 |= type.contains("v2");
                }
            } catch (VerbsException e) {
                if (e.errno() == Errno.ENODATA || e.errno() == Errno.EINVAL) {
                    continue;
                }
                line("      GID[" + i + "]: " + e.getMessage());
                continue;
            }
            line("      GID[" + i + "] " + gid + "  " + (type.isEmpty() ? "-" : type)
                    + (netdev.isEmpty() ? "" : "  " + netdev));
            shown++;
        }
        if (shown == 0) {
            line("      no GID in use");
        }
        if (p.linkLayer() == 2 && !roceV2 && !NativeLibraries.isSoftwareDevice()) {
            problem(device + " port " + port + " has no RoCE v2 GID (rdma_cm needs one for routable RoCE)",
                    "give its netdev an IP address (ip addr add <ip>/<len> dev <netdev>)");
        }
    }

    private void memory() {
        String limits = read(Path.of("/proc/self/limits"));
        String memlock = "unknown";
        long soft = -1;
        for (String line : limits.split("\n")) {
            if (line.startsWith("Max locked memory")) {
                String[] f = line.substring("Max locked memory".length()).trim().split("\\s+");
                soft = f[0].equals("unlimited") ? Long.MAX_VALUE : parseLong(f[0]);
                memlock = bytes(f[0]) + " (soft) / " + bytes(f[1]) + " (hard)";
            }
        }
        boolean ipcLock = hasCapability(CAP_IPC_LOCK);
        line("  RLIMIT_MEMLOCK: " + memlock + "; CAP_IPC_LOCK: " + (ipcLock ? "yes (the limit does not apply)"
                : "no"));
        long minimum = RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE + CONNECTION_BYTES;
        line("  needed: the default allocator registers " + RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE / MIB
                + " MiB chunks (at least one); an idle connection " + IDLE_CONNECTION_BYTES / 1024 + " KiB ("
                + RdmaChannelConfig.INITIAL_RECEIVE_CREDITS + " receive slots of "
                + RdmaChannelConfig.DEFAULT_RECEIVE_SLOT_SIZE / 1024 + " KiB), one moving large messages up to "
                + CONNECTION_BYTES / 1024 + " KiB (" + RdmaChannelConfig.DEFAULT_RECEIVE_CREDITS
                + " slots and a " + RdmaChannelConfig.DEFAULT_RING_SIZE / MIB + " MiB receive ring,"
                + " RdmaChannelOption.RING_SIZE): " + minimum / 1024 + " KiB for one busy connection, about "
                + (RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE + 1000 * IDLE_CONNECTION_BYTES) / MIB
                + " MiB for 1000 idle ones");
        if (soft >= 0 && soft != Long.MAX_VALUE) {
            line("  " + (ipcLock ? "without CAP_IPC_LOCK this limit would allow " : "this limit allows ")
                    + Math.max(0, (soft - RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE) / CONNECTION_BYTES)
                    + " busy connection(s)");
        }
        if (NativeLibraries.isSoftwareDevice()) {
            line("  (the software device pins nothing but counts registrations against this limit as the kernel"
                    + " does)");
        }
        if (!ipcLock && soft >= 0 && soft < minimum) {
            problem("RLIMIT_MEMLOCK is " + bytes(String.valueOf(soft)) + ", less than one connection needs ("
                            + minimum / 1024 + " KiB)",
                    "ulimit -l unlimited (systemd: LimitMEMLOCK=infinity; Docker: --ulimit memlock=-1;"
                            + " /etc/security/limits.conf: * - memlock unlimited)");
        }
        PinnedMemory.Snapshot pinned = PinnedMemory.snapshot();
        String status = read(Path.of("/proc/self/status"));
        line("  pinned by this process: " + pinned + "; VmLck " + field(status, "VmLck:"));
        if (pinned.limited() && pinned.usedFraction() >= 0.8) {
            problem("this process has pinned " + Math.round(pinned.usedFraction() * 100) + " % of RLIMIT_MEMLOCK ("
                    + pinned + "): further registrations fail", "raise it with ulimit -l, LimitMEMLOCK= in the"
                    + " systemd unit, or --ulimit memlock=-1 in docker");
        }
        String meminfo = read(Path.of("/proc/meminfo"));
        String size = field(meminfo, "Hugepagesize:");
        String thp = read(Path.of("/sys/kernel/mm/transparent_hugepage/enabled")).trim();
        line("  huge pages: " + field(meminfo, "HugePages_Total:") + " of " + (size.isEmpty() ? "?" : size)
                + " reserved, " + field(meminfo, "HugePages_Free:") + " free; transparent huge pages: "
                + (thp.isEmpty() ? "unknown" : thp));
        long auto = PageProbe.pageSize(PageMode.AUTO);
        long transparent = PageProbe.pageSize(PageMode.TRANSPARENT);
        long explicit = PageProbe.pageSize(PageMode.EXPLICIT);
        line("  pool pages (a chunk mapped and touched now, RdmaIoHandlerConfig.hugePages): AUTO " + pageName(auto)
                + ", TRANSPARENT " + pageName(transparent) + ", EXPLICIT "
                + (explicit < 0 ? "fails (no free 2 MiB hugetlb pages)" : pageName(explicit)));
        if (auto != 2 << 20) {
            // Slower on hardware (512 times the translations of 2 MiB pages), not broken: a note, not a problem.
            line("  note: the pool gets 4 KiB pages; reserve huge pages (sysctl vm.nr_hugepages=N) or enable"
                    + " transparent huge pages (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)");
        }
    }

    private static String pageName(long pageSize) {
        return pageSize == 2 << 20 ? "2 MiB pages" : pageSize == 4096 ? "4 KiB pages" : pageSize + " B pages";
    }

    /** Every port's counters, the non-zero ones first named: what retransmits, NAKs or drops. */
    private void counters() {
        List<VerbsDevice> devices;
        try {
            devices = VerbsDevice.list();
        } catch (RuntimeException e) {
            line("  " + e.getMessage());
            return;
        }
        if (devices.isEmpty()) {
            line("  no device");
        }
        for (VerbsDevice device : devices) {
            int ports;
            try (VerbsContext context = VerbsContext.open(device.name())) {
                ports = context.queryDevice().physPortCnt();
            } catch (RuntimeException e) {
                line("  " + device.name() + ": cannot open: " + e.getMessage());
                continue;
            }
            for (int port = 1; port <= ports; port++) {
                java.util.Map<String, Long> values = PortCounters.read(device.name(), port);
                if (values.isEmpty()) {
                    line("  " + device.name() + " port " + port + ": no counters (no counters or hw_counters in"
                            + " sysfs)");
                    continue;
                }
                List<String> nonZero = new ArrayList<>();
                List<String> zero = new ArrayList<>();
                values.forEach((name, value) -> (value == 0 ? zero : nonZero).add(name + " " + value));
                line("  " + device.name() + " port " + port + (NativeLibraries.isSoftwareDevice()
                        ? " (the software device's, this process only):" : ":"));
                for (int i = 0; i < nonZero.size(); i += 4) {
                    line("    " + String.join(", ", nonZero.subList(i, Math.min(nonZero.size(), i + 4))));
                }
                if (!zero.isEmpty()) {
                    line("    zero: " + String.join(" ", zero.stream().map(z -> z.substring(0, z.length() - 2))
                            .toList()));
                }
                long retryExceeded = values.getOrDefault(PortCounters.HW_COUNTERS + "/retry_exceeded_err", 0L);
                if (retryExceeded > 0) {
                    // Also what a peer that went away leaves: a note, not a problem.
                    line("    note: retry_exceeded_err " + retryExceeded + ": queue pairs gave up on a peer or path"
                            + " that stopped answering (a peer gone, loss, or an ack timeout too short for the path)");
                }
            }
        }
    }

    private void rdmaCm(String address) {
        List<InetAddress> targets = new ArrayList<>();
        if (address != null && !address.isBlank()) {
            try {
                targets.add(InetAddress.getByName(address.trim()));
            } catch (IOException e) {
                line("  " + address + ": not an address: " + e.getMessage());
                problem("cannot resolve " + address, "give an IP address of an RDMA netdev");
                return;
            }
        } else {
            targets.addAll(localAddresses());
            line("  (no address given: trying the host's addresses; `diagnose <address>` tries one)");
        }
        CmEventChannel channel;
        try {
            channel = CmEventChannel.create();
        } catch (RuntimeException e) {
            line("  " + e.getMessage());
            if (list(sysfs).isEmpty() && !NativeLibraries.isSoftwareDevice()) {
                return; // no device at all: reported above
            }
            problem("rdma_cm is unusable (" + e.getMessage() + ")", NativeLibraries.isSoftwareDevice()
                    ? "check the software device's registry directory (SOFTRDMA_RUNDIR)"
                    : "modprobe rdma_ucm; check /dev/infiniband/rdma_cm");
            return;
        }
        try (channel) {
            for (InetAddress target : targets) {
                String shown = target.getHostAddress();
                try (CmId id = channel.createId()) {
                    id.bind(new InetSocketAddress(target, 0));
                    line("  bind " + shown + ": ok" + boundDevice(id));
                } catch (VerbsException e) {
                    line("  bind " + shown + ": failed, " + Errno.describe(e.errno()));
                    if (address != null && !address.isBlank()) {
                        problem("rdma_cm cannot bind " + shown + " (" + Errno.name(e.errno()) + ")",
                                e.errno() == Errno.EADDRNOTAVAIL || e.errno() == Errno.ENODEV
                                        ? "no RDMA device has this address: use the IP of an RDMA netdev (IPoIB or"
                                        + " the RoCE netdev); on Soft-RoCE: rdma link add rxe0 type rxe netdev <if>"
                                        : "see the errno; is another process bound to it?");
                    }
                } catch (RuntimeException e) {
                    line("  bind " + shown + ": failed, " + e.getMessage());
                }
            }
        } catch (RuntimeException e) {
            line("  rdma_cm: " + e.getMessage());
        }
    }

    /**
     * A connection from {@code address} to itself ({@link ConnectionProbe}) and the settings both queue pairs
     * report: the device, port and GID rdma_cm chose, the traffic class, path MTU, ACK timeout and counts.
     */
    private void connection(String address) {
        if (address == null || address.isBlank()) {
            line("  (no address given: `diagnose <address>` connects to itself there and shows what the queue pairs"
                    + " get)");
            return;
        }
        ConnectionProbe.Settings asked;
        InetAddress target;
        try {
            asked = ConnectionProbe.Settings.fromSystemProperties();
            target = InetAddress.getByName(address.trim());
        } catch (IOException | IllegalArgumentException e) {
            line("  " + e.getMessage());
            return;
        }
        line("  asked: traffic class " + asked.trafficClass() + ", ACK timeout " + code(asked.ackTimeout())
                + ", retry count " + asked.retryCount() + ", RNR retry count " + asked.rnrRetryCount()
                + ", min RNR timer " + code(asked.minRnrTimer()) + ", SL " + code(asked.serviceLevel())
                + ", path MTU cap " + (asked.pathMtu() == 0 ? "none" : asked.pathMtu())
                + " (-Dio.netty.contrib.rdma.diagnose.trafficClass, .ackTimeout, .retryCount, .rnrRetryCount,"
                + " .minRnrTimer, .serviceLevel, .pathMtu)");
        ConnectionProbe.Result r;
        try {
            r = ConnectionProbe.connect(target, asked);
        } catch (RuntimeException e) {
            line("  connection to itself on " + target.getHostAddress() + " failed: " + e.getMessage());
            problem("rdma_cm cannot connect " + target.getHostAddress() + " to itself (" + e.getMessage() + ")",
                    "see the rdma_cm section; on kernel rdma_cm use an address of an RDMA netdev, not loopback");
            return;
        }
        line("  client: " + r.client());
        line("  server: " + r.server());
        if (r.client().trafficClass() == 0 && !NativeLibraries.isSoftwareDevice()) {
            line("  traffic class 0: RDMA shares the default (lossy) class; on a lossless RoCE fabric set IP_TOS to"
                    + " its DSCP << 2 (e.g. 104 for DSCP 26)");
        }
    }

    private static String code(int value) {
        return value < 0 ? "rdma_cm's" : String.valueOf(value);
    }

    private static String boundDevice(CmId id) {
        try {
            VerbsContext verbs = id.verbs();
            return verbs == null ? "" : " (device " + verbs.deviceName() + ")";
        } catch (RuntimeException e) {
            return "";
        }
    }

    /** The addresses of the host's interfaces that are up; loopback last (only the software device takes it). */
    private static List<InetAddress> localAddresses() {
        List<InetAddress> result = new ArrayList<>();
        List<InetAddress> loopback = new ArrayList<>();
        try {
            for (NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces())) {
                if (!nif.isUp()) {
                    continue;
                }
                for (InetAddress a : Collections.list(nif.getInetAddresses())) {
                    if (a instanceof Inet6Address && a.isLinkLocalAddress()) {
                        continue;
                    }
                    (a.isLoopbackAddress() ? loopback : result).add(a);
                }
            }
        } catch (SocketException e) {
            // nothing to try
        }
        result.addAll(loopback);
        return result.size() > 8 ? result.subList(0, 8) : result;
    }

    private static boolean hasCapability(int bit) {
        String capEff = field(read(Path.of("/proc/self/status")), "CapEff:");
        try {
            return !capEff.isEmpty() && (Long.parseUnsignedLong(capEff, 16) & (1L << bit)) != 0;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    private static String netdevName(int ifindex) {
        try {
            NetworkInterface nif = NetworkInterface.getByIndex(ifindex);
            return nif == null ? "ifindex " + ifindex : nif.getName();
        } catch (SocketException e) {
            return "ifindex " + ifindex;
        }
    }

    private static String mtu(int code) {
        return code >= 1 && code <= 5 ? String.valueOf(128 << code) : "?";
    }

    private static String formatGid(byte[] gid) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 16; i += 2) {
            if (i > 0) {
                b.append(':');
            }
            b.append(String.format("%02x%02x", gid[i], gid[i + 1]));
        }
        return b.toString();
    }

    private static boolean isZero(byte[] bytes) {
        for (byte b : bytes) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    private static String bytes(String value) {
        if (value.equals("unlimited")) {
            return "unlimited";
        }
        long n = parseLong(value);
        return n < 0 ? value : n % MIB == 0 ? n / MIB + " MiB" : n % 1024 == 0 ? n / 1024 + " KiB" : n + " B";
    }

    private static long parseLong(String value) {
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private static String field(String text, String name) {
        for (String line : text.split("\n")) {
            if (line.startsWith(name)) {
                return line.substring(name.length()).trim();
            }
        }
        return "";
    }

    private static List<String> list(Path dir) {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }

    private static String read(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    private void section(String title, Runnable body) {
        line("");
        line(title);
        try {
            body.run();
        } catch (Throwable t) {
            line("  (could not look: " + t + ")");
        }
    }

    private void problem(String what, String fix) {
        problems.add(what + "\n    fix: " + fix);
    }

    private void line(String text) {
        out.append(text).append('\n');
    }
}
