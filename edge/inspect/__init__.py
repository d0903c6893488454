"""What is inside a post: the few articles an edge node fetches of it (NNTP BODY of the .nfo, the
par2 index and the first archive volume, ~2 MB at most) read, headers only, never decompressing
file data.

A pure library, bytes in and results out (no network, no files), every length read from a body
bounded before it is used:

- yenc: one article's yEnc body decoded, its sizes and CRC checked (YencError when refused);
- par2: the files a PAR2 set lists (real names, sizes, MD5 of the first 16 KiB);
- nfo: an .nfo's text, release name, IMDb/TVDB/TVmaze/TMDB ids and password-site URLs;
- archives: RAR 4, RAR 5, 7z and ZIP headers: files inside, encryption, volumes;
- result: inspect_post (the bodies -> the result a node posts back, to_dict) and wanted_files
  (which of a post's files to read).

It imports the standard library and edge.digest.rules (the executable extensions) only.
"""
