#!/usr/bin/perl
# Reads a capture through Net::Pcap (Debian's libnet-pcap-perl) and prints
# what libpcap hands over: the file's properties, every packet of the loop,
# a filter set from inside the callback, pcap_next_ex and the errors.
# Usage: netpcap_read.pl CAPTURE
use strict;
use warnings;
use Net::Pcap;

my $file = shift or die "usage: $0 CAPTURE\n";
my $err = '';
my $p = Net::Pcap::open_offline($file, \$err) or die "open: $err\n";
printf "datalink %d (%s) snapshot %d swapped %d version %d.%d\n",
    Net::Pcap::datalink($p), Net::Pcap::datalink_val_to_name(Net::Pcap::datalink($p)),
    Net::Pcap::snapshot($p), Net::Pcap::is_swapped($p), Net::Pcap::major_version($p), Net::Pcap::minor_version($p);
my %stats;
printf "stats %d: %s\n", Net::Pcap::stats($p, \%stats), Net::Pcap::geterr($p);
my $n = 0;
sub each_packet {
    my ($user, $hdr, $data) = @_;
    $n++;
    printf "%s %d.%06d len %d caplen %d bytes %d first %s\n", $user, $hdr->{tv_sec},
        $hdr->{tv_usec}, $hdr->{len}, $hdr->{caplen}, length($data), unpack("H8", $data);
    if ($n == 3) {
        my $prog;
        my $r = Net::Pcap::compile($p, \$prog, "tcp", 1, 0);
        printf "compile %d setfilter %d\n", $r, $r == 0 ? Net::Pcap::setfilter($p, $prog) : -9;
        printf "bad compile %d: %s\n", Net::Pcap::compile($p, \$prog, "tcp port", 1, 0), Net::Pcap::geterr($p);
    }
    Net::Pcap::breakloop($p) if $n == 8;
}
printf "loop %d after %d\n", Net::Pcap::loop($p, -1, \&each_packet, "pkt"), $n;
my (%hdr, $data);
my $hdr = \%hdr;
my $r = Net::Pcap::next_ex($p, \%hdr, \$data);
printf "next_ex %d%s\n", $r, $r == 1 ? " len $hdr->{len}" : "";
printf "dispatch %d after %d\n", Net::Pcap::dispatch($p, -1, \&each_packet, "more"), $n;
printf "next_ex at end %d\n", Net::Pcap::next_ex($p, \%hdr, \$data);
Net::Pcap::close($p);
