// Package archive knows archives by their names and lists their contents.
//
// It owns two jobs and no I/O beyond reading the local files it is given:
//
//   - ParseName and OrderParts classify file names (zip, rar, 7z, tar and
//     compressed tars, and their multipart naming schemes) and decide whether
//     a candidate multipart set is complete, without touching any file.
//   - List reads the metadata of an archive (zip central directory, RAR block
//     headers, 7z header, tar headers) with hard bounds on entries, header
//     bytes and name length, and never extracts content. Every walker is
//     written to survive hostile bytes: it returns what it could list and a
//     short error fit for the catalogue, and never panics. ListSeeing also
//     shows a compressed tar's bytes, as they are read, to a function of the
//     caller's run on a goroutine of its own (the hash beside the
//     decompression), which has ended when ListSeeing returns.
//
// It must not touch Telegram, the store or the network, and must not write
// to disk. Test archives are built by the archivetest sub-package.
package archive
